package polllease

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runCoordinator runs a Coordinator on cfg until the test ends, then stops
// it and requires a clean shutdown.
func runCoordinator(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return c
}

func TestConfigValidation(t *testing.T) {
	p := newMemProvider(t, newMemStore(), "x", time.Second)
	valid := func() Config {
		return Config{
			Provider:   p,
			Membership: p,
			Targets:    func(context.Context) ([]string, error) { return nil, nil },
			Poll:       func(context.Context, string, uint64) error { return nil },
		}
	}
	cases := []struct {
		name   string
		modify func(*Config)
	}{
		{"nil provider", func(c *Config) { c.Provider = nil }},
		{"nil membership", func(c *Config) { c.Membership = nil }},
		{"nil targets", func(c *Config) { c.Targets = nil }},
		{"nil poll", func(c *Config) { c.Poll = nil }},
		{"bad group", func(c *Config) { c.Group = "\xff" }},
		{"bad instance", func(c *Config) { c.InstanceID = "\xfe" }},
		{"negative heartbeat TTL", func(c *Config) { c.HeartbeatTTL = -1 }},
		{"heartbeat interval too long", func(c *Config) { c.HeartbeatTTL, c.HeartbeatInterval = 10*time.Second, 9500*time.Millisecond }},
		{"negative heartbeat interval", func(c *Config) { c.HeartbeatInterval = -time.Second }},
		{"negative reconcile", func(c *Config) { c.ReconcileInterval = -time.Second }},
		{"negative min hold", func(c *Config) { c.MinHold = -time.Second }},
		{"load factor below 1", func(c *Config) { c.LoadFactor = 0.9 }},
		{"negative parallel", func(c *Config) { c.MaxParallel = -1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.modify(&cfg)
			_, err := New(cfg)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
		})
	}

	c, err := New(valid())
	require.NoError(t, err)
	assert.Equal(t, DefaultGroup, c.cfg.Group)
	assert.Equal(t, DefaultHeartbeatTTL, c.cfg.HeartbeatTTL)
	assert.Equal(t, DefaultHeartbeatInterval, c.cfg.HeartbeatInterval)
	assert.Equal(t, DefaultReconcileInterval, c.cfg.ReconcileInterval)
	assert.Equal(t, DefaultLoadFactor, c.cfg.LoadFactor)
	assert.Equal(t, DefaultPollInterval, c.cfg.PollInterval("t"))
	assert.Equal(t, DefaultTargetKey, c.cfg.TargetKey)
	assert.Equal(t, slog.LevelDebug, c.cfg.RoutineLevel.Level())
	// The documented failover bound of the defaults, max(L, H) + 1.2 × R,
	// is under 30 s.
	assert.Less(t, max(RecommendedLeaseTTL, DefaultHeartbeatTTL)+DefaultReconcileInterval*6/5, 30*time.Second)
	assert.Regexp(t, `^.+-\d+-[0-9a-f]{6}$`, c.ID())
	assert.Equal(t, "poll:lease:t", c.LeaseName("t"))
}

func targetNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("endpoint-%03d", i)
	}
	return out
}

func TestSingleInstancePollsEverything(t *testing.T) {
	targets := targetNames(20)
	f := newFleet(t, targets)
	n := f.start("solo")
	waitFor(t, "all targets owned", 5*time.Second, f.covered)
	waitFor(t, "every target polled", 5*time.Second, func() bool {
		seen := map[string]bool{}
		for _, r := range f.det.Polls() {
			seen[r.Target] = true
		}
		return len(seen) == len(targets)
	})
	assert.Equal(t, targets, n.c.Owned())
	assert.Equal(t, []string{"solo"}, n.c.Members())
	assert.True(t, n.c.IsPreferredOwner(targets[0]))
	for _, r := range f.det.Polls() {
		assert.Positive(t, r.Token)
	}

	require.NoError(t, f.Stop("solo"))
	assert.Empty(t, f.store.held(), "graceful stop releases every lease")
	members, err := n.p.Members(context.Background(), n.c.cfg.Group)
	require.NoError(t, err)
	assert.Empty(t, members, "graceful stop deregisters")
	assert.Len(t, f.eventsOf(EventReleased, time.Time{}), len(targets))
	for _, e := range f.eventsOf(EventReleased, time.Time{}) {
		assert.Equal(t, ReasonStop, e.Reason)
	}
	assert.Empty(t, n.c.Owned())
	require.ErrorIs(t, n.c.TryAcquire(context.Background(), "x"), ErrNotRunning)
}

// TestFleetBalanceChurnAndStop runs five instances, then a sixth joins and
// one leaves gracefully, with the overlap detector watching every poll.
func TestFleetBalanceChurnAndStop(t *testing.T) {
	targets := targetNames(60)
	f := newFleet(t, targets)
	for i := range 5 {
		f.start(fmt.Sprintf("node-%d", i))
	}
	took := waitFor(t, "balanced", 15*time.Second, f.balanced)
	t.Logf("5 instances balanced after %v", took)
	limit := Capacity(len(targets), 5, DefaultLoadFactor)
	for _, id := range f.IDs() {
		assert.LessOrEqual(t, len(f.node(id).c.Owned()), limit)
	}

	before := f.Owners()
	f.start("node-5")
	took = waitFor(t, "balanced after a join", 15*time.Second, f.balanced)
	movedJoin := 0
	for tg, ids := range f.Owners() {
		if before[tg][0] != ids[0] {
			movedJoin++
		}
	}
	// The joiner needs Floor targets; with announced holdings the join
	// moves that many, and a few more at most while the announcements of
	// a tick ago lag the handovers.
	floor := Floor(len(targets), 6, DefaultLoadFactor)
	t.Logf("join: balanced after %v, %d targets moved (minimum %d)", took, movedJoin, floor)
	assert.GreaterOrEqual(t, movedJoin, floor)
	assert.LessOrEqual(t, float64(movedJoin), 1.3*float64(floor), "targets the join moved")

	before = f.Owners()
	gone := "node-2"
	stopAt := time.Now()
	require.NoError(t, f.Stop(gone))
	took = waitFor(t, "covered after a graceful stop", 10*time.Second, f.covered)
	t.Logf("graceful stop: covered again after %v", took)
	// Only the leaver's targets move, besides those the load bounds make
	// move (a few at most).
	reassigned := 0
	for tg, ids := range f.Owners() {
		// A target nobody held at the snapshot (between owners) says nothing.
		if len(before[tg]) > 0 && before[tg][0] != gone && before[tg][0] != ids[0] {
			reassigned++
		}
	}
	assert.LessOrEqual(t, reassigned, len(targets)/20, "targets of staying instances that the leave reassigned")
	for _, e := range f.eventsOf(EventReleased, stopAt) {
		if e.Instance == gone {
			assert.Equal(t, ReasonStop, e.Reason)
		}
	}
	waitFor(t, "balanced after a graceful stop", 15*time.Second, f.balanced)
	assert.Empty(t, f.eventsOf(EventLost, time.Time{}))
}

// TestPartitionedInstanceFailsClosed cuts one instance off the store: its
// pollers stop before its leases expire, the others take its targets over
// after the TTL, and no target is ever polled twice at once.
func TestPartitionedInstanceFailsClosed(t *testing.T) {
	targets := targetNames(30)
	f := newFleet(t, targets)
	for i := range 3 {
		f.start(fmt.Sprintf("node-%d", i))
	}
	waitFor(t, "balanced", 15*time.Second, f.balanced)

	victim := f.node("node-1")
	mine := victim.c.Owned()
	require.NotEmpty(t, mine)
	cutAt := time.Now()
	victim.p.cut.Store(true)

	waitFor(t, "victim's pollers stopped", 5*time.Second, func() bool {
		for _, tg := range mine {
			if victim.c.IsOwned(tg) {
				return false
			}
		}
		return true
	})
	waitFor(t, "others cover every target", 10*time.Second, func() bool {
		own := f.Owners()
		for _, tg := range targets {
			if ids := own[tg]; len(ids) != 1 || ids[0] == "node-1" {
				return false
			}
		}
		return true
	})
	// Every poll of the victim ended before its leases could expire on the
	// store (the last renewal started before the cut).
	for _, r := range f.det.Polls() {
		if r.Instance == "node-1" {
			assert.True(t, r.End.Before(cutAt.Add(testLeaseTTL)), "poll of %s ended %v after the cut", r.Target, r.End.Sub(cutAt))
		}
	}
	for _, e := range f.eventsOf(EventAcquired, cutAt) {
		assert.NotEqual(t, "node-1", e.Instance, "a cut-off instance acquired %s", e.Target)
	}

	victim.p.cut.Store(false)
	waitFor(t, "balanced after the partition heals", 15*time.Second, f.balanced)
	assert.NotEmpty(t, f.node("node-1").c.Owned())
}

// TestStoreOutage takes the whole store down: every poller stops before its
// lease could expire, nothing is acquired during the outage, and the fleet
// covers every target again soon after the store returns.
func TestStoreOutage(t *testing.T) {
	targets := targetNames(30)
	f := newFleet(t, targets)
	for i := range 3 {
		f.start(fmt.Sprintf("node-%d", i))
	}
	waitFor(t, "balanced", 15*time.Second, f.balanced)

	downAt := time.Now()
	f.store.setDown(true)
	waitFor(t, "every poller stopped", 5*time.Second, func() bool { return len(f.Owners()) == 0 })
	for _, r := range f.det.Polls() {
		assert.True(t, r.End.Before(downAt.Add(testLeaseTTL)), "poll of %s by %s ended %v after the outage began", r.Target, r.Instance, r.End.Sub(downAt))
	}
	// Stay down past the heartbeat TTL, so every instance is fenced.
	time.Sleep(testBeatTTL)
	upAt := time.Now()
	assert.Empty(t, f.eventsOf(EventAcquired, downAt), "acquired during the outage")
	f.store.setDown(false)

	took := waitFor(t, "covered after the outage", 10*time.Second, f.covered)
	t.Logf("covered %v after the store returned (reconcile interval %v)", took, testReconcile)
	for _, e := range f.eventsOf(EventAcquired, upAt) {
		assert.Greater(t, e.Token, uint64(0))
	}
}

func TestTargetsAddedAndRemoved(t *testing.T) {
	targets := targetNames(20)
	f := newFleet(t, targets)
	f.start("a")
	f.start("b")
	waitFor(t, "balanced", 15*time.Second, f.balanced)

	changed := time.Now()
	next := append(targetNames(10), "new-1", "new-2", "new-3")
	f.targets.set(next)
	waitFor(t, "new set covered", 10*time.Second, func() bool { return f.covered() && len(f.Owners()) == len(next) })
	removed := f.eventsOf(EventReleased, changed)
	assert.Len(t, removed, 10)
	for _, e := range removed {
		assert.Equal(t, ReasonRemoved, e.Reason)
		assert.NotContains(t, next, e.Target)
	}
	for _, tg := range targets[10:] {
		assert.NotContains(t, f.store.held(), "fleet-"+t.Name()+":lease:"+tg)
	}
}

func TestLostLeaseStopsPollerAndIsRetaken(t *testing.T) {
	f := newFleet(t, targetNames(3))
	n := f.start("solo")
	waitFor(t, "covered", 10*time.Second, f.covered)
	target := targetNames(3)[1]
	n.c.mu.Lock()
	oldToken := n.c.owned[target].token
	n.c.mu.Unlock()

	f.store.drop(n.c.LeaseName(target))
	waitFor(t, "lost event", 5*time.Second, func() bool { return len(f.eventsOf(EventLost, time.Time{})) == 1 })
	lost := f.eventsOf(EventLost, time.Time{})[0]
	assert.Equal(t, target, lost.Target)
	assert.ErrorIs(t, lost.Err, core.ErrLockLost)
	waitFor(t, "retaken", 5*time.Second, func() bool { return n.c.IsOwned(target) })
	n.c.mu.Lock()
	newToken := n.c.owned[target].token
	n.c.mu.Unlock()
	assert.Greater(t, newToken, oldToken)
}

func TestManualAcquireReleaseAndInspect(t *testing.T) {
	f := newFleet(t, nil) // no targets: the reconcile loop acquires nothing
	a := f.start("a")
	b := f.start("b")
	ctx := context.Background()
	waitFor(t, "both listed", 5*time.Second, func() bool { return len(a.c.Members()) == 2 && len(b.c.Members()) == 2 })

	require.ErrorIs(t, a.c.TryAcquire(ctx, ""), core.ErrInvalidName)
	// A target "a" is preferred for, so rebalancing leaves it with "a".
	manual := "manual"
	for i := 0; Preferred(manual, []string{"a", "b"}) != "a"; i++ {
		manual = fmt.Sprintf("manual-%d", i)
	}
	require.NoError(t, a.c.TryAcquire(ctx, manual))
	require.ErrorIs(t, a.c.TryAcquire(ctx, manual), core.ErrNotAcquired, "not reentrant")
	require.ErrorIs(t, b.c.TryAcquire(ctx, manual), core.ErrNotAcquired)
	assert.True(t, a.c.IsOwned(manual))
	assert.False(t, b.c.IsOwned(manual))
	ok, err := a.c.IsOwnedStrict(ctx, manual)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.c.IsOwnedStrict(ctx, manual)
	require.NoError(t, err)
	assert.False(t, ok)
	waitFor(t, "polled", 5*time.Second, func() bool { return len(f.det.Polls()) > 0 })

	f.targets.set([]string{manual})
	waitFor(t, "seen by b", 5*time.Second, func() bool {
		b.c.mu.Lock()
		defer b.c.mu.Unlock()
		return b.c.targets[manual]
	})
	snap, err := b.c.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, snap.Members)
	require.Len(t, snap.Leases, 1)
	assert.Equal(t, LeaseInfo{Target: manual, Lock: b.c.LeaseName(manual), Preferred: b.c.PreferredOwner(manual),
		Held: true, Owner: "a", Token: snap.Leases[0].Token}, snap.Leases[0])
	assert.Positive(t, snap.Leases[0].Token)

	require.NoError(t, a.c.Release(ctx, manual))
	require.NoError(t, a.c.Release(ctx, manual), "idempotent")
	assert.False(t, a.c.IsOwned(manual))
	released := f.eventsOf(EventReleased, time.Time{})
	require.NotEmpty(t, released)
	assert.Equal(t, ReasonManual, released[0].Reason)
}

// flakyMembership fails Register and Announce while fail is set; the
// leases are unaffected.
type flakyMembership struct {
	*memProvider
	fail atomic.Bool
}

func (m *flakyMembership) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if m.fail.Load() {
		return errStoreDown
	}
	return m.memProvider.Register(ctx, group, id, ttl)
}

func (m *flakyMembership) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if m.fail.Load() {
		return nil, errStoreDown
	}
	return m.memProvider.Announce(ctx, group, id, ttl, value)
}

// TestHeartbeatFencePausesAndResumes: when heartbeats fail past their
// trust window the pollers pause though the leases are kept; when a
// heartbeat succeeds again they resume under the same leases.
func TestHeartbeatFencePausesAndResumes(t *testing.T) {
	f := newFleet(t, targetNames(5))
	p := newMemProvider(t, f.store, "flaky", testLeaseTTL)
	m := &flakyMembership{memProvider: p}
	cfg := f.config("flaky", p)
	cfg.Membership = m
	cfg.HeartbeatTTL, cfg.HeartbeatInterval = time.Second, 200*time.Millisecond
	c := runCoordinator(t, cfg)
	waitFor(t, "owns everything", 5*time.Second, func() bool { return len(c.Owned()) == 5 && c.IsOwned(targetNames(5)[0]) })
	tokens := map[string]uint64{}
	c.mu.Lock()
	for tg, l := range c.owned {
		tokens[tg] = l.token
	}
	c.mu.Unlock()

	failAt := time.Now()
	m.fail.Store(true)
	waitFor(t, "paused", 5*time.Second, func() bool { return !c.IsOwned(targetNames(5)[0]) })
	assert.Len(t, c.Owned(), 5, "the leases are kept")
	waitFor(t, "uncertain events", 5*time.Second, func() bool { return len(f.eventsOf(EventUncertain, failAt)) == 5 })
	assert.Error(t, c.TryAcquire(context.Background(), "other"), "no acquisition while uncertain")
	pausedAt := time.Now()
	polls := len(f.det.Polls())
	time.Sleep(3 * testPollEvery) // polls would happen in this window if not paused
	for _, r := range f.det.Polls()[polls:] {
		assert.True(t, r.Start.Before(pausedAt), "polled %s while paused", r.Target)
	}

	m.fail.Store(false)
	waitFor(t, "resumed", 5*time.Second, func() bool { return len(f.eventsOf(EventResumed, failAt)) == 5 })
	for _, tg := range targetNames(5) {
		assert.True(t, c.IsOwned(tg))
	}
	c.mu.Lock()
	for tg, l := range c.owned {
		assert.Equal(t, tokens[tg], l.token, "same lease after resuming")
	}
	c.mu.Unlock()
	assert.Empty(t, f.eventsOf(EventLost, time.Time{}))
}

// TestRollingRestart replaces every instance in turn, with the overlap
// detector on.
func TestRollingRestart(t *testing.T) {
	f := newFleet(t, targetNames(40))
	for i := range 3 {
		f.start(fmt.Sprintf("gen0-%d", i))
	}
	waitFor(t, "covered", 10*time.Second, f.covered)
	for i := range 3 {
		require.NoError(t, f.Stop(fmt.Sprintf("gen0-%d", i)))
		f.start(fmt.Sprintf("gen1-%d", i))
		waitFor(t, "covered after a restart", 10*time.Second, f.covered)
	}
	waitFor(t, "balanced", 15*time.Second, f.balanced)
	assert.Empty(t, f.eventsOf(EventLost, time.Time{}))
}

// TestFailedRenewalPausesPoller: a failed renewal pauses the lease's poller
// (EventUncertain with the renewal's error) while the lease is kept; the
// next successful renewal resumes it (EventResumed) under the same lease;
// every successful renewal is an EventRenewed.
func TestFailedRenewalPausesPoller(t *testing.T) {
	targets := targetNames(3)
	f := newFleet(t, targets)
	// Renewed every 1 s, retried every 250 ms after a failure, trusted
	// for 2.7 s after the start of the last success: room for a failure
	// and a recovery before the lease would be lost.
	p := newMemProvider(t, f.store, "solo", 3*time.Second)
	n := f.startWith("solo", p)
	waitFor(t, "covered", 5*time.Second, f.covered)

	// Renewals are reported, one event per lease renewed.
	waitFor(t, "renewed events", 10*time.Second, func() bool {
		return p.renewed.Load() >= 2*int64(len(targets)) &&
			int64(len(f.eventsOf(EventRenewed, time.Time{}))) == p.renewed.Load()
	})
	for _, e := range f.eventsOf(EventRenewed, time.Time{}) {
		assert.Equal(t, "solo", e.Instance)
		assert.Contains(t, targets, e.Target)
		assert.Positive(t, e.Token)
		assert.NoError(t, e.Err)
	}
	tokens := map[string]uint64{}
	n.c.mu.Lock()
	for tg, l := range n.c.owned {
		tokens[tg] = l.token
	}
	n.c.mu.Unlock()

	failAt := time.Now()
	p.failRenew.Store(true)
	waitFor(t, "uncertain events", 5*time.Second, func() bool {
		return len(f.eventsOf(EventUncertain, failAt)) == len(targets)
	})
	pausedAt := time.Now()
	for _, e := range f.eventsOf(EventUncertain, failAt) {
		assert.ErrorIs(t, e.Err, errRenewFailed, "the renewal's error")
	}
	for _, tg := range targets {
		assert.False(t, n.c.IsOwned(tg), "%s still pollable with its renewal failing", tg)
	}
	assert.Equal(t, targets, n.c.Owned(), "the leases are kept")
	time.Sleep(3 * testPollEvery) // polls would start in this window if not paused
	for _, r := range f.det.Polls() {
		assert.True(t, r.Start.Before(pausedAt), "polled %s while its renewal was failing", r.Target)
	}
	assert.Empty(t, f.eventsOf(EventRenewed, pausedAt))

	p.failRenew.Store(false)
	waitFor(t, "resumed events", 5*time.Second, func() bool {
		return len(f.eventsOf(EventResumed, failAt)) == len(targets)
	})
	resumedAt := time.Now()
	for _, tg := range targets {
		assert.True(t, n.c.IsOwned(tg))
	}
	waitFor(t, "polling again", 5*time.Second, func() bool {
		seen := map[string]bool{}
		for _, r := range f.det.Polls() {
			if !r.Start.Before(resumedAt) {
				seen[r.Target] = true
			}
		}
		return len(seen) == len(targets)
	})
	// Each target: uncertain, then the renewal that ended it, then
	// resumed.
	for _, tg := range targets {
		var kinds []EventKind
		for _, e := range f.events.Where(func(e Event) bool { return e.Target == tg && !e.Time.Before(failAt) }) {
			kinds = append(kinds, e.Kind)
		}
		// A renewal already under way when the failures began may
		// come first.
		for len(kinds) > 0 && kinds[0] == EventRenewed {
			kinds = kinds[1:]
		}
		require.GreaterOrEqual(t, len(kinds), 3, "%s: %v", tg, kinds)
		assert.Equal(t, []EventKind{EventUncertain, EventRenewed, EventResumed}, kinds[:3], tg)
	}
	n.c.mu.Lock()
	for tg, l := range n.c.owned {
		assert.Equal(t, tokens[tg], l.token, "same lease after resuming")
	}
	n.c.mu.Unlock()
	assert.Empty(t, f.eventsOf(EventLost, time.Time{}))
	waitFor(t, "renewed events after recovery", 5*time.Second, func() bool {
		return int64(len(f.eventsOf(EventRenewed, time.Time{}))) == p.renewed.Load() &&
			len(f.eventsOf(EventRenewed, resumedAt)) >= len(targets)
	})
}

// TestRenewalFailureUntilLost: renewals that keep failing pause the poller
// at once, and the lease is lost when its trust window closes.
func TestRenewalFailureUntilLost(t *testing.T) {
	f := newFleet(t, targetNames(1))
	p := newMemProvider(t, f.store, "solo", testLeaseTTL)
	n := f.startWith("solo", p)
	target := targetNames(1)[0]
	waitFor(t, "covered", 5*time.Second, f.covered)

	failAt := time.Now()
	p.failRenew.Store(true)
	waitFor(t, "uncertain", 5*time.Second, func() bool { return len(f.eventsOf(EventUncertain, failAt)) == 1 })
	assert.False(t, n.c.IsOwned(target))
	waitFor(t, "lost", 5*time.Second, func() bool { return len(f.eventsOf(EventLost, failAt)) >= 1 })
	lost := f.eventsOf(EventLost, failAt)[0]
	assert.ErrorIs(t, lost.Err, core.ErrLockLost)
	assert.ErrorIs(t, lost.Err, errRenewFailed, "lost because the renewals kept failing")
	assert.Empty(t, f.eventsOf(EventResumed, failAt))
}

// countingHeartbeater is a memProvider's membership that implements
// core.Heartbeater, not core.Announcer, and counts the calls of each kind.
type countingHeartbeater struct {
	p                                  *memProvider
	registers, lists, beats, announces atomic.Int64
}

func (m *countingHeartbeater) Deregister(ctx context.Context, group, id string) error {
	return m.p.Deregister(ctx, group, id)
}

// countingAnnouncer is a countingHeartbeater that is a core.Announcer too.
type countingAnnouncer struct{ *countingHeartbeater }

func (m countingAnnouncer) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	m.announces.Add(1)
	return m.p.Announce(ctx, group, id, ttl, value)
}

func (m *countingHeartbeater) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	m.registers.Add(1)
	return m.p.Register(ctx, group, id, ttl)
}

func (m *countingHeartbeater) Members(ctx context.Context, group string) ([]string, error) {
	m.lists.Add(1)
	return m.p.Members(ctx, group)
}

func (m *countingHeartbeater) Heartbeat(ctx context.Context, group, id string, ttl time.Duration) ([]string, error) {
	m.beats.Add(1)
	if err := m.p.Register(ctx, group, id, ttl); err != nil {
		return nil, err
	}
	return m.p.Members(ctx, group)
}

// TestTickHeartbeats: each reconcile tick heartbeats and lists the members
// in one Heartbeat call; the heartbeat loop registers on its own only at
// start and when the ticks are further apart than HeartbeatInterval. With
// a core.Announcer, every beat of either is one Announce call instead.
func TestTickHeartbeats(t *testing.T) {
	cases := []struct {
		name             string
		beat, reconcile  time.Duration
		minLoop, maxLoop int64 // Register calls of the heartbeat loop
		minTicks         int64
	}{
		// Ticks every 250 ms ± 20 %, heartbeat due every 500 ms: the
		// ticks do all the beating after the first.
		{name: "ticks faster", beat: 500 * time.Millisecond, reconcile: 250 * time.Millisecond, minLoop: 1, maxLoop: 1, minTicks: 5},
		// Ticks every 1.5 s, heartbeat due every 300 ms: the loop fills
		// in, about four times per tick.
		{name: "ticks slower", beat: 300 * time.Millisecond, reconcile: 1500 * time.Millisecond, minLoop: 4, maxLoop: 12, minTicks: 1},
	}
	for _, tc := range cases {
		for _, announce := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s announce=%v", tc.name, announce), func(t *testing.T) {
				f := newFleet(t, targetNames(4))
				p := newMemProvider(t, f.store, "solo", testLeaseTTL)
				m := &countingHeartbeater{p: p}
				cfg := f.config("solo", p)
				cfg.Membership = m
				if announce {
					cfg.Membership = countingAnnouncer{m}
				}
				cfg.HeartbeatInterval, cfg.ReconcileInterval = tc.beat, tc.reconcile
				c := runCoordinator(t, cfg)

				time.Sleep(2 * time.Second) // a measurement window, not a wait for an event
				t.Logf("in 2 s: %d Heartbeat calls (ticks), %d Register calls (heartbeat loop), %d Members calls, %d Announce calls",
					m.beats.Load(), m.registers.Load(), m.lists.Load(), m.announces.Load())
				assert.Zero(t, m.lists.Load(), "no separate member listing")
				beats, loop := m.beats.Load(), m.registers.Load()
				if announce {
					assert.Zero(t, beats+loop, "Heartbeat or Register calls beside Announce")
					beats, loop = m.announces.Load()-tc.minLoop, tc.minLoop
				}
				assert.GreaterOrEqual(t, beats, tc.minTicks, "a beat per tick")
				assert.GreaterOrEqual(t, loop, tc.minLoop, "heartbeat loop beats")
				assert.LessOrEqual(t, loop, tc.maxLoop, "heartbeat loop beats")
				assert.Len(t, c.Owned(), 4)
				assert.Empty(t, f.eventsOf(EventUncertain, time.Time{}), "the heartbeat's trust window closed")
			})
		}
	}
}
