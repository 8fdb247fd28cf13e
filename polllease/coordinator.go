package polllease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// ErrNotRunning is returned by the calls that need a running Coordinator
// (TryAcquire) before Run starts or after it returns.
var ErrNotRunning = errors.New("polllease: coordinator not running")

// Coordinator shares the polling of a set of targets with the other
// instances of its Group: it holds the lease of, and polls, the targets
// assigned to it. See the package documentation for the protocol.
//
// The methods are safe for concurrent use. IsOwned, Owned, Members,
// PreferredOwner and IsPreferredOwner read local state and do no I/O.
type Coordinator struct {
	cfg Config
	id  string
	log *slog.Logger

	kickSweep chan struct{} // a lease's handle context ended
	kickTick  chan struct{} // the heartbeat recovered: reconcile now

	// beatMu serializes the heartbeats of the two loops, so that their
	// outcomes apply in the order they started and lastBeat only moves
	// forward.
	beatMu sync.Mutex

	mu          sync.Mutex
	started     bool
	running     bool
	owned       map[string]*lease
	targets     map[string]bool
	members     []string
	assign      map[string]string
	probes      map[string]*probe
	handedTo    map[string]handoff // targets released to rebalance
	tick        uint64
	nextTick    time.Time // when the reconcile timer fires (or fired, until the tick's heartbeat starts)
	beatOK      bool      // the last heartbeat succeeded: acquisitions allowed
	beatFails   int       // heartbeats failed in a row
	lastBeat    time.Time // start of the last successful heartbeat
	lastAttempt time.Time // start of the last heartbeat, successful or not
	fenced      bool      // the heartbeat trust window closed: pollers paused
	fence       *time.Timer

	pollers  sync.WaitGroup
	watchers sync.WaitGroup
	// emitMu orders the events: it is held while an event is decided
	// (under mu) and delivered, so that, for example, no renewal of a
	// lease is reported after its release. It is taken before mu, never
	// under it.
	emitMu sync.Mutex
}

// lease is a target this instance holds.
type lease struct {
	target    string
	h         core.Handle
	token     uint64
	since     time.Time
	stopWatch func() bool
	poll      *poller // the current poll loop; cancelled while paused
	// keepFor is the preferred instance this lease is kept despite: it
	// was released to it once and it did not take it, so releasing it
	// again would only leave it unpolled.
	keepFor string
	// uncertain: the last renewal of the lease failed, so its poller is
	// paused until one succeeds (or the trust window closes and the
	// lease is lost).
	uncertain bool
	// unwatch ends the lease's renewal watcher; nil when the backend
	// reports no renewals (the handle is no core.LeaseReporter).
	unwatch chan struct{}
}

// handoff records a target released to rebalance: to whom, and when.
type handoff struct {
	to   string
	tick uint64
}

// poller is one run of a target's poll loop.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// probe paces the acquire attempts of a target this instance does not hold.
type probe struct {
	preferred string // the preferred owner when the probe state began
	since     uint64 // the tick it began
	next      uint64 // the first tick at which to try again
}

// Pacing of the attempts on targets this instance does not hold. A target
// it is preferred for is tried every tick: its holder releases it at some
// tick, and each tick of delay leaves it unpolled that much longer. A target
// it only backs up is tried once its preferred instance has had backupGrace
// ticks to take it, then, while held by someone, only as a safety net (its
// holder may release it to a preferred instance that never takes it): every
// recheckTicks to 2×recheckTicks ticks, recheckTicks being the larger of
// maxBackupBackoff and recheckPerBackup × the targets the instance backs up,
// so that these checks cost an instance at most about one round trip per
// recheckPerBackup ticks however large the fleet. A change of the live
// members starts every target's pacing afresh, since a holder may be gone.
const (
	backupGrace      = 2
	maxBackupBackoff = 128
	recheckPerBackup = 32
	// handbackWindow: a target this instance released to rebalance and
	// takes back, as its backup, within this many ticks was not taken by
	// the instance it was handed to, which therefore is not polling it;
	// the lease is then kept instead of handed over again.
	handbackWindow = backupGrace + 2
)

// New validates cfg and returns a Coordinator. It does no I/O; Run starts
// it. An invalid cfg gives an error matching core.ErrInvalidArgument.
func New(cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Coordinator{
		cfg:       cfg,
		id:        cfg.InstanceID,
		log:       cfg.Logger.With(slog.String("instance", cfg.InstanceID)),
		kickSweep: make(chan struct{}, 1),
		kickTick:  make(chan struct{}, 1),
		owned:     make(map[string]*lease),
		targets:   make(map[string]bool),
		assign:    make(map[string]string),
		probes:    make(map[string]*probe),
		handedTo:  make(map[string]handoff),
	}, nil
}

// ID returns this instance's ID.
func (c *Coordinator) ID() string { return c.id }

// LeaseName returns the lock name of target's lease on the store.
func (c *Coordinator) LeaseName(target string) string { return c.cfg.LeaseName(target) }

// Run heartbeats, reconciles and polls until ctx is done, then stops
// gracefully: it stops every poller, releases every lease (reason "stop")
// and deregisters, so the other instances take the targets over within one
// reconcile tick. It returns the errors of that shutdown, or nil. Run may be
// called once.
//
// Acquisitions start one reconcile tick after the first successful
// heartbeat, so instances started together see each other before they
// divide the targets.
func (c *Coordinator) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("polllease: Run called twice")
	}
	c.started, c.running = true, true
	c.fence = time.AfterFunc(time.Hour, c.fenceIfStale)
	c.fence.Stop()
	c.mu.Unlock()

	firstBeat := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.heartbeatLoop(ctx, firstBeat)
	}()
	c.reconcileLoop(ctx, firstBeat)
	wg.Wait()
	return c.shutdown(context.WithoutCancel(ctx))
}

func (c *Coordinator) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (c *Coordinator) reconcileLoop(ctx context.Context, firstBeat <-chan struct{}) {
	select {
	case <-firstBeat:
	case <-ctx.Done():
		return
	}
	timer := time.NewTimer(c.scheduleTick())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kickSweep:
			c.sweep(ctx)
			continue
		case <-c.kickTick:
			if !timer.Stop() {
				<-timer.C
			}
			c.mu.Lock()
			c.nextTick = time.Now()
			c.mu.Unlock()
		case <-timer.C:
		}
		c.reconcile(ctx)
		timer.Reset(c.scheduleTick())
	}
}

// scheduleTick returns the jittered delay to the next reconcile tick and
// records when it falls, so the heartbeat loop can leave the heartbeat to
// it.
func (c *Coordinator) scheduleTick() time.Duration {
	d := c.jitter(c.cfg.ReconcileInterval)
	c.mu.Lock()
	c.nextTick = time.Now().Add(d)
	c.mu.Unlock()
	return d
}

// heartbeatLoop registers this instance whenever the reconcile ticks, which
// heartbeat too, have not attempted a heartbeat for HeartbeatInterval (a
// quarter of it while heartbeats fail): at start, and when the ticks are
// slower than the heartbeat, slow, or skipped.
func (c *Coordinator) heartbeatLoop(ctx context.Context, firstBeat chan<- struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		c.mu.Lock()
		wait := c.beatWait(time.Now())
		c.mu.Unlock()
		if wait <= 0 {
			_, done, err := c.beat(ctx, false)
			if ctx.Err() != nil {
				return
			}
			if done && err == nil && first {
				first = false
				close(firstBeat)
			}
			c.mu.Lock()
			wait = c.beatWait(time.Now())
			c.mu.Unlock()
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// beatWait returns how long the heartbeat loop waits before it beats, from
// now; c.mu is held. A reconcile tick that is due, or running, when the
// loop's beat falls due heartbeats too: the loop waits for it, up to
// beatSlack longer, rather than beat twice in a row.
func (c *Coordinator) beatWait(now time.Time) time.Duration {
	if c.lastAttempt.IsZero() {
		return 0
	}
	if c.beatFails > 0 {
		return c.lastAttempt.Add(max(c.cfg.HeartbeatInterval/4, time.Millisecond)).Sub(now)
	}
	due := c.lastAttempt.Add(c.cfg.HeartbeatInterval)
	if now.Before(due) {
		return due.Sub(now)
	}
	latest := due.Add(c.beatSlack())
	if !c.nextTick.IsZero() && !c.nextTick.After(latest) && now.Before(latest) {
		return latest.Sub(now)
	}
	return 0
}

// beatSlack is how much later than HeartbeatInterval the heartbeat loop
// lets a reconcile tick beat in its place: the tick's jitter, up to a
// quarter interval, but never so long that the trust window could close.
func (c *Coordinator) beatSlack() time.Duration {
	return min(c.cfg.HeartbeatInterval/4, (c.cfg.HeartbeatTTL-c.cfg.heartbeatMargin()-c.cfg.HeartbeatInterval)/2)
}

// beat heartbeats once. With list (the reconcile tick) it also returns the
// live members, through core.Heartbeat: one round trip on a backend that
// implements core.Heartbeater, Register then Members on the others. Without
// list (the heartbeat loop) it only registers, and does nothing, reporting
// done false, when a beat made while it waited for its turn made this one
// unnecessary. Beats are serialized, so their outcomes apply in the order
// they started; an outcome that arrives after ctx ended is not applied.
func (c *Coordinator) beat(ctx context.Context, list bool) (members []string, done bool, err error) {
	c.beatMu.Lock()
	defer c.beatMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	if !list && c.beatWait(start) > 0 {
		c.mu.Unlock()
		return nil, false, nil
	}
	c.lastAttempt = start
	if list {
		c.nextTick = time.Time{} // this tick has beaten; the loop need not wait for it
	}
	c.mu.Unlock()

	bctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	if list {
		members, err = core.Heartbeat(bctx, c.cfg.Membership, c.cfg.Group, c.id, c.cfg.HeartbeatTTL)
	} else {
		err = c.cfg.Membership.Register(bctx, c.cfg.Group, c.id, c.cfg.HeartbeatTTL)
	}
	cancel()
	if ctx.Err() != nil {
		return nil, true, ctx.Err()
	}
	if err != nil {
		c.beatFailed(err)
		return nil, true, err
	}
	// A tick that recovers goes on with its own assignment; a recovery
	// in the heartbeat loop calls for a tick at once.
	c.beatSucceeded(start, !list)
	return members, true, nil
}

func (c *Coordinator) beatFailed(err error) {
	c.mu.Lock()
	c.beatOK = false
	c.beatFails++
	first := c.beatFails == 1
	c.mu.Unlock()
	if first {
		c.log.Warn("Heartbeat failed: no acquisitions until it succeeds", slog.Any("error", err))
	} else {
		c.log.Debug("Heartbeat failed", slog.Any("error", err))
	}
}

// beatSucceeded records a successful heartbeat that started at start: it
// reopens the trust window and, if it had closed, resumes the pollers.
func (c *Coordinator) beatSucceeded(start time.Time, kickTick bool) {
	c.mu.Lock()
	recovered := !c.beatOK && !c.lastBeat.IsZero()
	c.beatOK = true
	c.beatFails = 0
	c.lastBeat = start
	if c.running {
		c.fence.Reset(time.Until(c.beatDeadline()))
	}
	var paused []pausedPoller
	if c.fenced {
		c.fenced = false
		for _, l := range c.owned {
			// A lease whose renewal failed stays paused until a
			// renewal succeeds.
			if !l.uncertain {
				paused = append(paused, pausedPoller{l, l.poll})
			}
		}
	}
	c.mu.Unlock()
	if recovered {
		c.log.Info("Heartbeat recovered")
		if kickTick {
			select {
			case c.kickTick <- struct{}{}:
			default:
			}
		}
	}
	c.resume(paused)
}

// pausedPoller is a lease whose poller was cancelled to pause it, and that
// poller.
type pausedPoller struct {
	l    *lease
	poll *poller
}

// resume restarts the pollers of paused leases that nothing keeps paused
// any more (the lease is still held, the heartbeat's trust window is open,
// its last renewal succeeded) and reports each with EventResumed. A paused
// poller was cancelled when it was paused; resume waits for it to return
// before its successor starts, so one instance never polls a target twice
// at once, and resumes nothing when someone else restarted it meanwhile.
func (c *Coordinator) resume(paused []pausedPoller) {
	if len(paused) == 0 {
		return
	}
	for _, p := range paused {
		if p.poll != nil {
			<-p.poll.done
		}
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	var events []Event
	c.mu.Lock()
	for _, p := range paused {
		l := p.l
		if !c.running || c.owned[l.target] != l || !c.mayPoll(l) || l.poll != p.poll {
			continue
		}
		c.startPoller(l)
		events = append(events, c.event(EventResumed, l, "", nil))
	}
	c.mu.Unlock()
	c.deliver(events)
}

// beatDeadline is the end of the heartbeat's trust window; c.mu is held.
func (c *Coordinator) beatDeadline() time.Time {
	return c.lastBeat.Add(c.cfg.HeartbeatTTL - c.cfg.heartbeatMargin())
}

// fenceIfStale runs when the heartbeat's trust window closes: unless a
// heartbeat succeeded meanwhile, the store may already list this instance as
// gone, so every poller pauses.
func (c *Coordinator) fenceIfStale() {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.mu.Lock()
	if !c.running || c.fenced || time.Now().Before(c.beatDeadline()) {
		c.mu.Unlock()
		return
	}
	c.fenced = true
	err := fmt.Errorf("polllease: no successful heartbeat since %s", c.lastBeat.Format(time.RFC3339Nano))
	var events []Event
	for _, l := range c.owned {
		if l.poll != nil {
			l.poll.cancel()
		}
		// A lease paused by a failed renewal was reported uncertain
		// already.
		if !l.uncertain {
			events = append(events, c.event(EventUncertain, l, "", err))
		}
	}
	c.mu.Unlock()
	c.log.Warn("Heartbeat trust window closed: pollers paused", slog.Any("error", err))
	c.deliver(events)
}

// watchLease follows the renewals of l's lease as the backend's keeper
// reports them through rep, from the state seen when it was acquired: each
// successful renewal is an EventRenewed; a failed one pauses l's poller
// (EventUncertain) until a renewal succeeds (EventResumed). It returns when
// l is detached (unwatch closes) or its handle's context ends; the sweep
// reports a loss.
func (c *Coordinator) watchLease(l *lease, rep core.LeaseReporter, seen core.LeaseState, unwatch <-chan struct{}) {
	for {
		changed := rep.LeaseChanged()
		now, _ := rep.Lease()
		if !c.leaseChanged(l, seen, now) {
			return
		}
		seen = now
		select {
		case <-changed:
		case <-unwatch:
			return
		case <-l.h.Context().Done():
			return
		}
	}
}

// leaseChanged applies a change of l's lease state from prev to now, and
// reports false when l is no longer this instance's live lease.
func (c *Coordinator) leaseChanged(l *lease, prev, now core.LeaseState) bool {
	c.emitMu.Lock()
	c.mu.Lock()
	if c.owned[l.target] != l || l.h.Context().Err() != nil {
		c.mu.Unlock()
		c.emitMu.Unlock()
		return false
	}
	var events []Event
	for n := prev.Renewals; n < now.Renewals; n++ {
		events = append(events, c.event(EventRenewed, l, "", nil))
	}
	var paused []pausedPoller
	switch {
	case now.Err != nil && !l.uncertain:
		// The lease is still ours until its trust window closes, but
		// the store may not have extended it: stop polling until a
		// renewal says it did, rather than poll into a takeover.
		l.uncertain = true
		if !c.fenced { // else paused and reported already
			if l.poll != nil {
				l.poll.cancel()
			}
			events = append(events, c.event(EventUncertain, l, "", now.Err))
		}
	case now.Err == nil && l.uncertain:
		l.uncertain = false
		paused = append(paused, pausedPoller{l, l.poll})
	}
	c.mu.Unlock()
	c.deliver(events)
	c.emitMu.Unlock()
	c.resume(paused)
	return true
}

// reconcile is one tick: heartbeat and read the live members, drop lost
// leases, re-read the targets, release what should go, acquire what should
// come.
func (c *Coordinator) reconcile(ctx context.Context) {
	// The tick's heartbeat lists the members in the same call, so the
	// assignment uses a list taken now (a list from an earlier heartbeat
	// can predate instances that started since), and the heartbeat loop
	// has nothing to do while the ticks keep up.
	members, _, err := c.beat(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug("Heartbeat failed: tick skipped", slog.Any("error", err))
		}
		return
	}
	// After the heartbeat, which can take long against a failing store:
	// leases lost meanwhile are dropped before the assignment, so their
	// targets are acquired again in this tick.
	c.sweep(ctx)
	if !c.canAcquire() {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.ReconcileInterval)
	defer cancel()

	raw, err := c.cfg.Targets(tctx)
	if err != nil {
		c.log.Warn("Reading targets failed: tick skipped", slog.Any("error", err))
		return
	}
	targets := make(map[string]bool, len(raw))
	for _, t := range raw {
		if err := kit.ValidateName(t); err != nil {
			c.log.Warn("Target ignored", slog.String("target", t), slog.Any("error", err))
			continue
		}
		targets[t] = true
	}
	if !slices.Contains(members, c.id) {
		// Our heartbeat succeeded, so we are live, whatever a lagging
		// listing says.
		members = append(members, c.id)
	}
	slices.Sort(members)
	list := make([]string, 0, len(targets))
	for t := range targets {
		list = append(list, t)
	}
	assign := Assign(list, members, c.cfg.LoadFactor)
	now := time.Now()

	c.mu.Lock()
	c.tick++
	tick := c.tick
	if !slices.Equal(members, c.members) {
		clear(c.probes)
	}
	c.targets, c.members, c.assign = targets, members, assign

	var removed, rebalance []*lease
	var movable []*lease
	for t, l := range c.owned {
		switch {
		case !targets[t]:
			removed = append(removed, l)
		case assign[t] != c.id && assign[t] != l.keepFor && now.Sub(l.since) >= c.cfg.MinHold:
			movable = append(movable, l)
		}
	}
	if len(movable) > 0 {
		// Oldest first; at most max(1, 10 % of owned) per tick.
		slices.SortFunc(movable, func(a, b *lease) int { return a.since.Compare(b.since) })
		rebalance = movable[:min(len(movable), max(1, len(c.owned)/10))]
	}
	var acquire []string
	backups := 0
	for t, pref := range assign {
		isBackup := pref != c.id && backup(t, pref, members) == c.id
		if isBackup {
			backups++
		}
		if c.owned[t] != nil {
			delete(c.probes, t)
			continue
		}
		p := c.probes[t]
		if p == nil || p.preferred != pref {
			p = &probe{preferred: pref, since: tick, next: tick}
			c.probes[t] = p
		}
		switch {
		case tick < p.next:
		case pref == c.id:
			acquire = append(acquire, t)
		case tick >= p.since+backupGrace && isBackup:
			// The preferred owner has had a tick or two to take it;
			// make sure it is not left unpolled.
			acquire = append(acquire, t)
		}
	}
	for t := range c.probes {
		if !targets[t] {
			delete(c.probes, t)
		}
	}
	for t, h := range c.handedTo {
		if assign[t] != h.to || tick > h.tick+handbackWindow {
			delete(c.handedTo, t)
		}
	}
	for _, l := range removed {
		c.detach(l)
	}
	for _, l := range rebalance {
		c.detach(l)
		// Give the preferred instance its grace from now: as the
		// target's backup, this instance takes it back only if the
		// preferred one does not take it within backupGrace ticks.
		c.handedTo[l.target] = handoff{to: assign[l.target], tick: tick}
		c.probes[l.target] = &probe{preferred: assign[l.target], since: tick, next: tick}
	}
	c.mu.Unlock()

	c.releaseAll(ctx, removed, ReasonRemoved)
	c.releaseAll(ctx, rebalance, ReasonRebalance)
	recheck := uint64(max(maxBackupBackoff, recheckPerBackup*backups))
	c.acquireAll(ctx, tick, recheck, time.Now().Add(c.cfg.ReconcileInterval), acquire)
}

func (c *Coordinator) canAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running && c.beatOK && !c.fenced
}

// acquireAll tries the targets' leases, MaxParallel at a time, starting no
// attempt after until; the targets left are tried on the next tick. A
// target it backs up and finds held is tried again in recheck to
// 2×recheck ticks.
func (c *Coordinator) acquireAll(ctx context.Context, tick, recheck uint64, until time.Time, targets []string) {
	slices.Sort(targets)
	sem := make(chan struct{}, max(1, c.cfg.MaxParallel))
	var wg sync.WaitGroup
	for _, t := range targets {
		if ctx.Err() != nil || !c.canAcquire() || time.Now().After(until) {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Not cut short by ctx: a grant that arrives after Run ends is
			// released by acquire, where a cancelled call could leave it
			// held on the store, unknown to anyone, for a lease TTL.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.attemptTimeout())
			err := c.acquire(actx, t)
			cancel()
			if ctx.Err() != nil {
				return // stopping
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			p := c.probes[t]
			if h, ok := c.handedTo[t]; ok && err == nil && p != nil && p.preferred == h.to {
				if l := c.owned[t]; l != nil {
					l.keepFor = p.preferred
					c.log.Warn("Preferred instance did not take a target it was handed: keeping it",
						slog.String("target", t), slog.String("preferred", p.preferred))
				}
			}
			if err == nil || p == nil {
				delete(c.probes, t)
				return
			}
			if p.preferred != c.id {
				// Held by someone, so polled: look again only rarely, in
				// case its holder lets it go while the preferred owner
				// does not take it. A change of the preferred owner or
				// of the members resets this.
				p.next = tick + recheck + rand.Uint64N(recheck)
			}
			if !errors.Is(err, core.ErrNotAcquired) {
				c.log.Warn("Lease acquire failed", slog.String("target", t), slog.Any("error", err))
			}
		}()
	}
	wg.Wait()
}

// attemptTimeout bounds one store call of the reconcile loop, so a hung
// store cannot stall it. It is generous: a call cut short may have taken
// effect on the store unknown to this instance.
func (c *Coordinator) attemptTimeout() time.Duration {
	return max(c.cfg.HeartbeatTTL/2, time.Second)
}

// acquire makes one attempt at target's lease and starts its poller.
func (c *Coordinator) acquire(ctx context.Context, target string) error {
	h, err := c.cfg.Provider.Mutex(c.cfg.LeaseName(target)).TryAcquire(ctx)
	if err != nil {
		return err
	}
	// The lease's state as granted: the watcher reports every change
	// from here on.
	rep, _ := h.(core.LeaseReporter)
	var seen core.LeaseState
	if rep != nil {
		var kept bool
		if seen, kept = rep.Lease(); !kept {
			rep = nil // nothing renews it: a connection-bound lock, say
		}
	}
	c.mu.Lock()
	if !c.running || c.fenced || c.owned[target] != nil {
		// Stopped, fenced or raced by a concurrent TryAcquire while the
		// attempt was in flight: give the grant back.
		err := kit.Busy("instance %s is not acquiring", c.id)
		if c.owned[target] != nil {
			err = kit.Busy("target %q is held by this instance", target)
		}
		c.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HeartbeatInterval)
		defer cancel()
		_ = h.Release(rctx)
		return err
	}
	l := &lease{target: target, h: h, token: h.FencingToken(), since: time.Now()}
	c.owned[target] = l
	l.stopWatch = context.AfterFunc(h.Context(), func() {
		select {
		case c.kickSweep <- struct{}{}:
		default:
		}
	})
	c.startPoller(l)
	if rep != nil {
		l.unwatch = make(chan struct{})
		c.watchers.Add(1)
	}
	ev := c.event(EventAcquired, l, "", nil)
	c.mu.Unlock()
	c.emit(ev)
	if rep != nil {
		// Started after EventAcquired is out, so the lease's events
		// follow it.
		go func() {
			defer c.watchers.Done()
			c.watchLease(l, rep, seen, l.unwatch)
		}()
	}
	return nil
}

// detach removes l from the owned set and cancels its poller and its
// watcher; c.mu is held. The caller then waits for the poller and releases
// the handle.
func (c *Coordinator) detach(l *lease) {
	if c.owned[l.target] == l {
		delete(c.owned, l.target)
	}
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.unwatch != nil {
		close(l.unwatch)
	}
	if l.poll != nil {
		l.poll.cancel()
	}
}

// releaseAll waits for the detached leases' pollers to stop, then releases
// them on the store, MaxParallel at a time, and reports each.
func (c *Coordinator) releaseAll(ctx context.Context, leases []*lease, reason Reason) error {
	if len(leases) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HeartbeatInterval)
	defer cancel()
	sem := make(chan struct{}, max(1, c.cfg.MaxParallel))
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.release(rctx, l, reason)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Coordinator) release(ctx context.Context, l *lease, reason Reason) error {
	if l.poll != nil {
		<-l.poll.done
	}
	err := l.h.Release(ctx)
	if err != nil {
		c.log.Warn("Lease release failed: it expires by its TTL", slog.String("target", l.target),
			slog.Uint64("token", l.token), slog.Any("error", err))
	}
	c.emit(c.event(EventReleased, l, reason, err))
	return err
}

// sweep drops the leases whose handle context ended (lost on the store).
func (c *Coordinator) sweep(ctx context.Context) {
	var lost []*lease
	c.mu.Lock()
	for _, l := range c.owned {
		if l.h.Context().Err() != nil {
			c.detach(l)
			lost = append(lost, l)
		}
	}
	c.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HeartbeatInterval)
	defer cancel()
	for _, l := range lost {
		if l.poll != nil {
			<-l.poll.done
		}
		// Clean up whatever the store still has; the lease is gone either
		// way.
		_ = l.h.Release(rctx)
		c.emit(c.event(EventLost, l, "", context.Cause(l.h.Context())))
	}
}

// shutdown stops every poller, releases every lease and deregisters.
func (c *Coordinator) shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.running = false
	c.fence.Stop()
	leases := make([]*lease, 0, len(c.owned))
	for _, l := range c.owned {
		leases = append(leases, l)
	}
	for _, l := range leases {
		c.detach(l)
	}
	c.mu.Unlock()

	err := c.releaseAll(ctx, leases, ReasonStop)
	c.pollers.Wait()
	c.watchers.Wait()
	dctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	if derr := c.cfg.Membership.Deregister(dctx, c.cfg.Group, c.id); derr != nil {
		err = errors.Join(err, fmt.Errorf("polllease: deregister %s: %w", c.id, derr))
	}
	c.log.Info("Coordinator stopped", slog.Int("released", len(leases)))
	return err
}

// startPoller starts l's poll loop; c.mu is held.
func (c *Coordinator) startPoller(l *lease) {
	ctx, cancel := context.WithCancel(l.h.Context())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	l.poll = p
	c.pollers.Add(1)
	go func() {
		defer c.pollers.Done()
		defer close(p.done)
		defer cancel()
		c.pollLoop(ctx, l)
	}()
}

func (c *Coordinator) pollLoop(ctx context.Context, l *lease) {
	interval := c.cfg.PollInterval(l.target)
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		if !c.owns(l) {
			return
		}
		if err := c.cfg.Poll(ctx, l.target, l.token); err != nil && ctx.Err() == nil {
			c.log.Warn("Poll failed", slog.String("target", l.target), slog.Uint64("token", l.token), slog.Any("error", err))
		}
		timer.Reset(max(0, interval-time.Since(start)))
	}
}

// owns reports whether l is this instance's live, unpaused lease.
func (c *Coordinator) owns(l *lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned[l.target] == l && c.mayPoll(l)
}

// mayPoll reports whether l, a lease this instance holds, may be polled
// now: its handle is live and neither the heartbeat's trust window nor a
// failed renewal has paused it; c.mu is held.
func (c *Coordinator) mayPoll(l *lease) bool {
	return !c.fenced && !l.uncertain && l.h.Context().Err() == nil
}

func (c *Coordinator) event(kind EventKind, l *lease, reason Reason, err error) Event {
	return Event{Kind: kind, Instance: c.id, Target: l.target, Token: l.token, Reason: reason, Err: err, Time: time.Now()}
}

// emit logs the events and hands them to OnEvent, in order.
func (c *Coordinator) emit(events ...Event) {
	if len(events) == 0 {
		return
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.deliver(events)
}

// deliver is emit with c.emitMu held.
func (c *Coordinator) deliver(events []Event) {
	ctx := context.Background()
	for _, e := range events {
		level := slog.LevelInfo
		switch e.Kind {
		case EventLost, EventUncertain:
			level = slog.LevelWarn
		case EventRenewed:
			// Every lease renews every interval: thousands of lines.
			level = slog.LevelDebug
		}
		if c.log.Enabled(ctx, level) {
			attrs := []slog.Attr{slog.String("target", e.Target), slog.Uint64("token", e.Token)}
			if e.Reason != "" {
				attrs = append(attrs, slog.String("reason", string(e.Reason)))
			}
			if e.Err != nil {
				attrs = append(attrs, slog.Any("error", e.Err))
			}
			c.log.LogAttrs(ctx, level, "Lease "+e.Kind.String(), attrs...)
		}
		if c.cfg.OnEvent != nil {
			c.cfg.OnEvent(e)
		}
	}
}
