package polllease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
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
	// now is the clock of the trust windows: the heartbeat's, and the
	// checks of a lease's window before a poll. Tests move it.
	now func() time.Time

	kickSweep chan struct{} // a lease's handle context ended
	kickTick  chan struct{} // the heartbeat recovered: reconcile now

	// announcer is Config.Membership where it is a core.Announcer, else
	// nil; overAnnounced: a heartbeat held more targets than an
	// announcement names, and said so once. announceOff: the Announcer
	// answered ErrUnsupported (it cannot keep values here), so heartbeats
	// go without values and the assignment is Assign's, as for a
	// Membership that does not announce.
	announcer     core.Announcer
	overAnnounced atomic.Bool
	announceOff   atomic.Bool

	// beatMu serializes the heartbeats of the two loops, so that their
	// outcomes apply in the order they started and lastBeat only moves
	// forward.
	beatMu sync.Mutex

	mu          sync.Mutex
	started     bool
	running     bool
	owned       map[string]*lease
	unowned     map[string]unowned // targets held before, since they were let go
	targets     map[string]bool
	members     []string
	assign      map[string]string
	probes      map[string]*probe
	handedTo    map[string]handoff  // targets released to rebalance
	handbacks   map[string]handback // instances that did not take targets handed to them
	tick        uint64
	nextTick    time.Time // when the reconcile timer fires (or fired, until the tick's heartbeat starts)
	beatOK      bool      // the last heartbeat succeeded: acquisitions allowed
	beatFails   int       // heartbeats failed in a row
	lastBeat    time.Time // start of the last successful heartbeat
	lastAttempt time.Time // start of the last heartbeat, successful or not
	fenced      bool      // the heartbeat trust window closed: pollers paused
	fence       *time.Timer

	// workers counts the pollers and lease watchers; shutdown waits for
	// them.
	workers sync.WaitGroup
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
	// uncertain: the last renewal of the lease failed, so its poller is
	// paused until one succeeds (or the trust window closes and the
	// lease is lost).
	uncertain bool
	// unwatch ends the lease's renewal watcher; nil when the backend
	// reports no renewals (the handle is no core.LeaseReporter).
	unwatch chan struct{}
	// polling is when the poller last started (acquire or resume);
	// paused is when it was last paused (its EventUncertain), zero while
	// it polls. State reads them; event sets them.
	polling, paused time.Time
}

// poller is one run of a target's poll loop.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates cfg and returns a Coordinator. It does no I/O; Run starts
// it. An invalid cfg gives an error matching core.ErrInvalidArgument.
func New(cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	announcer, _ := cfg.Membership.(core.Announcer)
	return &Coordinator{
		cfg:       cfg,
		id:        cfg.InstanceID,
		log:       newLogger(cfg),
		now:       time.Now,
		kickSweep: make(chan struct{}, 1),
		kickTick:  make(chan struct{}, 1),
		owned:     make(map[string]*lease),
		unowned:   make(map[string]unowned),
		targets:   make(map[string]bool),
		assign:    make(map[string]string),
		probes:    make(map[string]*probe),
		handedTo:  make(map[string]handoff),
		handbacks: make(map[string]handback),
		announcer: announcer,
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
	c.workers.Wait()
	dctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	if derr := c.cfg.Membership.Deregister(dctx, c.cfg.Group, c.id); derr != nil {
		err = errors.Join(err, fmt.Errorf("polllease: deregister %s: %w", c.id, derr))
	}
	c.log.Info("Coordinator stopped", slog.Int("released", len(leases)))
	return err
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
	targets, err := c.readTargets(tctx)
	if err != nil {
		c.log.Warn("Reading targets failed: tick skipped", slog.Any("error", err))
		return
	}
	ids := make([]string, 0, len(members)+1)
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, c.id) {
		// Our heartbeat succeeded, so we are live, whatever a lagging
		// listing says.
		ids = append(ids, c.id)
	}
	slices.Sort(ids)
	owners := c.ownersOf(targets, members)
	p := c.plan(targets, ids, owners, AssignFrom(slices.Collect(maps.Keys(targets)), ids, owners, c.cfg.LoadFactor))
	c.mu.Lock()
	c.forgetRemoved()
	c.mu.Unlock()
	c.releaseAll(ctx, p.removed, ReasonRemoved)
	c.releaseAll(ctx, p.rebalance, ReasonRebalance)
	recheck := uint64(max(maxBackupBackoff, recheckPerBackup*p.backups))
	c.acquireAll(ctx, p.tick, recheck, time.Now().Add(c.cfg.ReconcileInterval), p.acquire)
}

// ownersOf returns the holders of targets that members' announcements
// name, this instance's own leases included, where the Membership is a
// core.Announcer; nil otherwise, and the assignment is then Assign's.
func (c *Coordinator) ownersOf(targets map[string]bool, members []core.Member) map[string]string {
	if c.announcer == nil || c.announceOff.Load() {
		return nil
	}
	c.mu.Lock()
	mine := c.holdings()
	c.mu.Unlock()
	return ownersOf(targets, members, c.id, mine)
}

// readTargets returns the valid targets of Config.Targets as a set; it logs
// and skips the others.
func (c *Coordinator) readTargets(ctx context.Context) (map[string]bool, error) {
	raw, err := c.cfg.Targets(ctx)
	if err != nil {
		return nil, err
	}
	targets := make(map[string]bool, len(raw))
	for _, t := range raw {
		if err := kit.ValidateName(t); err != nil {
			c.log.Warn("Target ignored", slog.String("target", t), slog.Any("error", err))
			continue
		}
		targets[t] = true
	}
	return targets, nil
}
