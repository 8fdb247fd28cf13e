package polllease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/polllease/pollleasetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startLazy starts an instance "lazy" that heartbeats but takes none of
// its targets until active is set (its targets source is empty until then).
func startLazy(t *testing.T, f *fleet, active *atomic.Bool) {
	p := newMemProvider(t, f.store, "lazy", testLeaseTTL)
	cfg := f.config("lazy", p)
	cfg.Targets = func(ctx context.Context) ([]string, error) {
		if !active.Load() {
			return nil, nil
		}
		return f.targets.get(ctx)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	f.Add("lazy", &node{c: c, p: p}, pollleasetest.Run(c.Run))
}

// releaseBursts returns, per instance, the start times of its bursts of
// rebalance releases: releases less than two reconcile intervals apart
// are one burst.
func (f *fleet) releaseBursts() map[string][]time.Time {
	last := map[string]time.Time{}
	out := map[string][]time.Time{}
	for _, e := range f.eventsOf(EventReleased, time.Time{}) {
		if e.Reason != ReasonRebalance {
			continue
		}
		if l, ok := last[e.Instance]; !ok || e.Time.Sub(l) > 2*testReconcile {
			out[e.Instance] = append(out[e.Instance], e.Time)
		}
		last[e.Instance] = e.Time
	}
	return out
}

// heldOffTimes returns how many consecutive times instance id held its
// handoffs to other off.
func (f *fleet) heldOffTimes(id, other string) int {
	c := f.node(id).c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handbacks[other].n
}

// TestLiveInstanceThatDoesNotPoll: an instance heartbeats but never takes
// its targets. The others hand it targets, see them taken by a backup
// instead, and hold their handoffs to it off for a hold that doubles with
// each time (2, then 4, then 8 × MinHold), so every target stays covered
// and the handoffs grow rare.
func TestLiveInstanceThatDoesNotPoll(t *testing.T) {
	f := newFleet(t, targetNames(30))
	startLazy(t, f, new(atomic.Bool))
	f.start("a")
	f.start("b")

	waitFor(t, "handoffs to lazy held off three times in a row", 30*time.Second, func() bool {
		return f.heldOffTimes("a", "lazy") >= 3 || f.heldOffTimes("b", "lazy") >= 3
	})
	for id, bursts := range f.releaseBursts() {
		t.Logf("%s: %d bursts of handoffs: %v", id, len(bursts), bursts)
		// The k-th hold-off starts within the k-th burst, so the next
		// burst starts at least MinHold × 2^k later.
		for k := 1; k < len(bursts) && k <= maxKeepDoublings; k++ {
			assert.GreaterOrEqual(t, bursts[k].Sub(bursts[k-1]), testMinHold<<k, "%s: burst %d after %d", id, k+1, k)
		}
	}
	waitFor(t, "covered", 10*time.Second, f.covered)
}

// TestSlowPreferredInstanceGetsItsTargets: an instance that does not take
// the targets handed to it at first (a loaded machine, say), and does
// later, gets them: the fleet balances.
func TestSlowPreferredInstanceGetsItsTargets(t *testing.T) {
	f := newFleet(t, targetNames(30))
	var active atomic.Bool
	startLazy(t, f, &active)
	f.start("a")
	f.start("b")

	waitFor(t, "lazy's targets handed to it and taken back", 30*time.Second, func() bool {
		return (f.heldOffTimes("a", "lazy") > 0 || f.heldOffTimes("b", "lazy") > 0) && f.covered()
	})
	active.Store(true)
	waitFor(t, "balanced", 30*time.Second, f.balanced)
}
