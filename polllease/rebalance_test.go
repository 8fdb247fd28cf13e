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
// its targets until active is set (its targets source is empty until then),
// and returns how many targets Assign gives it among a, b and lazy.
func startLazy(t *testing.T, f *fleet, active *atomic.Bool) int {
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
	targets, _ := f.targets.get(context.Background())
	share := 0
	for _, owner := range Assign(targets, []string{"a", "b", "lazy"}, DefaultLoadFactor) {
		if owner == "lazy" {
			share++
		}
	}
	require.Positive(t, share)
	return share
}

// releasesByTarget returns the times of the rebalance releases of each
// target, in order.
func (f *fleet) releasesByTarget() map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, e := range f.eventsOf(EventReleased, time.Time{}) {
		if e.Reason == ReasonRebalance {
			out[e.Target] = append(out[e.Target], e.Time)
		}
	}
	return out
}

// TestLiveInstanceThatDoesNotPoll: an instance heartbeats but never takes
// its targets. Their backups take them after a grace, hand each to it, take
// it back and keep it for a hold that doubles with each take-back (2, then
// 4 × MinHold), so every target stays covered and the handoffs grow rare.
func TestLiveInstanceThatDoesNotPoll(t *testing.T) {
	f := newFleet(t, targetNames(30))
	share := startLazy(t, f, new(atomic.Bool))
	f.start("a")
	f.start("b")

	waitFor(t, "three handoffs of each of lazy's targets", 30*time.Second, func() bool {
		rel := f.releasesByTarget()
		n := 0
		for _, times := range rel {
			if len(times) >= 3 {
				n++
			}
		}
		return n >= share
	})
	for target, times := range f.releasesByTarget() {
		// The k-th take-back keeps the lease MinHold × 2^k from the
		// moment it was taken back, which is after the k-th release.
		for k := 1; k < len(times) && k <= maxKeepDoublings; k++ {
			assert.GreaterOrEqual(t, times[k].Sub(times[k-1]), testMinHold<<k, "%s: release %d after %d", target, k+1, k)
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
	share := startLazy(t, f, &active)
	f.start("a")
	f.start("b")

	waitFor(t, "lazy's targets handed to it and taken back", 30*time.Second, func() bool {
		return len(f.releasesByTarget()) >= share && f.covered()
	})
	active.Store(true)
	waitFor(t, "balanced", 30*time.Second, f.balanced)
}
