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

	mu        sync.Mutex
	started   bool
	running   bool
	owned     map[string]*lease
	targets   map[string]bool
	members   []string
	assign    map[string]string
	probes    map[string]*probe
	handedTo  map[string]handoff // targets released to rebalance
	tick      uint64
	beatOK    bool      // the last heartbeat succeeded: acquisitions allowed
	beatFails int       // heartbeats failed in a row
	lastBeat  time.Time // start of the last successful heartbeat
	fenced    bool      // the heartbeat trust window closed: pollers paused
	fence     *time.Timer

	pollers sync.WaitGroup
	emitMu  sync.Mutex
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
// ticks to take it, then, while held by someone, every maxBackupBackoff to
// 2×maxBackupBackoff ticks.
const (
	backupGrace      = 2
	maxBackupBackoff = 128
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
	timer := time.NewTimer(c.jitter(c.cfg.ReconcileInterval))
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
		case <-timer.C:
		}
		c.reconcile(ctx)
		timer.Reset(c.jitter(c.cfg.ReconcileInterval))
	}
}

// heartbeatLoop registers this instance every HeartbeatInterval, and every
// quarter interval while registrations fail.
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
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
		err := c.cfg.Membership.Register(rctx, c.cfg.Group, c.id, c.cfg.HeartbeatTTL)
		cancel()
		if ctx.Err() != nil {
			return
		}
		next := c.cfg.HeartbeatInterval
		if err != nil {
			c.beatFailed(err)
			next = max(c.cfg.HeartbeatInterval/4, time.Millisecond)
		} else {
			c.beatSucceeded(start)
			if first {
				first = false
				close(firstBeat)
			}
		}
		timer.Reset(next)
	}
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

func (c *Coordinator) beatSucceeded(start time.Time) {
	c.mu.Lock()
	recovered := !c.beatOK && !c.lastBeat.IsZero()
	c.beatOK = true
	c.beatFails = 0
	c.lastBeat = start
	if c.running {
		c.fence.Reset(time.Until(c.beatDeadline()))
	}
	var resume []*lease
	var wait []chan struct{}
	if c.fenced {
		c.fenced = false
		for _, l := range c.owned {
			resume = append(resume, l)
			if l.poll != nil {
				wait = append(wait, l.poll.done)
			}
		}
	}
	c.mu.Unlock()
	if recovered {
		c.log.Info("Heartbeat recovered")
		select {
		case c.kickTick <- struct{}{}:
		default:
		}
	}
	// A paused poller was cancelled when the instance was fenced; let it
	// finish before its successor starts, so one instance never polls a
	// target twice at once.
	for _, d := range wait {
		<-d
	}
	var events []Event
	c.mu.Lock()
	for _, l := range resume {
		if c.owned[l.target] != l || l.h.Context().Err() != nil || c.fenced || !c.running {
			continue
		}
		c.startPoller(l)
		events = append(events, c.event(EventResumed, l, "", nil))
	}
	c.mu.Unlock()
	c.emit(events...)
}

// beatDeadline is the end of the heartbeat's trust window; c.mu is held.
func (c *Coordinator) beatDeadline() time.Time {
	return c.lastBeat.Add(c.cfg.HeartbeatTTL - c.cfg.heartbeatMargin())
}

// fenceIfStale runs when the heartbeat's trust window closes: unless a
// heartbeat succeeded meanwhile, the store may already list this instance as
// gone, so every poller pauses.
func (c *Coordinator) fenceIfStale() {
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
		events = append(events, c.event(EventUncertain, l, "", err))
	}
	c.mu.Unlock()
	c.log.Warn("Heartbeat trust window closed: pollers paused", slog.Any("error", err))
	c.emit(events...)
}

// reconcile is one tick: drop lost leases, re-read targets and members,
// release what should go, acquire what should come.
func (c *Coordinator) reconcile(ctx context.Context) {
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
		if err := core.ValidateName(t); err != nil {
			c.log.Warn("Target ignored", slog.String("target", t), slog.Any("error", err))
			continue
		}
		targets[t] = true
	}
	members, err := c.cfg.Membership.Members(tctx, c.cfg.Group)
	if err != nil {
		c.log.Warn("Reading members failed: tick skipped", slog.Any("error", err))
		return
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
	for t, pref := range assign {
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
		case tick >= p.since+backupGrace && backup(t, pref, members) == c.id:
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
	c.acquireAll(ctx, tick, time.Now().Add(c.cfg.ReconcileInterval), acquire)
}

func (c *Coordinator) canAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running && c.beatOK && !c.fenced
}

// acquireAll tries the targets' leases, MaxParallel at a time, starting no
// attempt after until; the targets left are tried on the next tick.
func (c *Coordinator) acquireAll(ctx context.Context, tick uint64, until time.Time, targets []string) {
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
				// does not take it. A change of the preferred owner
				// resets this.
				p.next = tick + maxBackupBackoff + rand.Uint64N(maxBackupBackoff)
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
	c.mu.Lock()
	if !c.running || c.fenced || c.owned[target] != nil {
		// Stopped, fenced or raced by a concurrent TryAcquire while the
		// attempt was in flight: give the grant back.
		err := core.Busy("instance %s is not acquiring", c.id)
		if c.owned[target] != nil {
			err = core.Busy("target %q is held by this instance", target)
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
	ev := c.event(EventAcquired, l, "", nil)
	c.mu.Unlock()
	c.emit(ev)
	return nil
}

// detach removes l from the owned set and cancels its poller; c.mu is held.
// The caller then waits for the poller and releases the handle.
func (c *Coordinator) detach(l *lease) {
	if c.owned[l.target] == l {
		delete(c.owned, l.target)
	}
	if l.stopWatch != nil {
		l.stopWatch()
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
	return c.owned[l.target] == l && !c.fenced && l.h.Context().Err() == nil
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
	for _, e := range events {
		attrs := []slog.Attr{slog.String("target", e.Target), slog.Uint64("token", e.Token)}
		if e.Reason != "" {
			attrs = append(attrs, slog.String("reason", string(e.Reason)))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.Any("error", e.Err))
		}
		level, msg := slog.LevelInfo, "Lease "+e.Kind.String()
		if e.Kind == EventLost || e.Kind == EventUncertain {
			level = slog.LevelWarn
		}
		c.log.LogAttrs(context.Background(), level, msg, attrs...)
		if c.cfg.OnEvent != nil {
			c.cfg.OnEvent(e)
		}
	}
}
