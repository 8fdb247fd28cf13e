package polllease

import (
	"context"
	"slices"
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

// TestBackupRescuesUnannouncedTarget: a target assigned to an instance
// that does not take it, and that no announcement names for backupGrace
// ticks, is tried by its backup whatever the pacing of its earlier
// attempts says, once a spell; an announced holder ends the spell.
func TestBackupRescuesUnannouncedTarget(t *testing.T) {
	members := []string{"a", "b", "lazy"}
	target := ""
	for _, tg := range targetNames(50) {
		if backup(tg, "lazy", members) == "b" {
			target = tg
			break
		}
	}
	require.NotEmpty(t, target)
	c, err := New(Config{Provider: newMemProvider(t, newMemStore(), "b", testLeaseTTL), Membership: newMemProvider(t, newMemStore(), "b", testLeaseTTL),
		InstanceID: "b", Targets: func(context.Context) ([]string, error) { return nil, nil }, Poll: func(context.Context, string, uint64) error { return nil }})
	require.NoError(t, err)
	c.members, c.assign = members, map[string]string{target: "lazy"}
	// An earlier attempt found it held and paced the next one far off.
	c.probes[target] = &probe{preferred: "lazy", since: 1, next: 1000}
	tries := func(tick uint64, owners map[string]string) bool {
		acquire, _ := c.pickAttempts(tick, owners)
		return slices.Contains(acquire, target)
	}
	held := map[string]string{target: "a"}
	assert.False(t, tries(10, held), "held by a: paced")
	assert.False(t, tries(11, map[string]string{}), "unannounced for no tick yet")
	assert.False(t, tries(12, map[string]string{}), "unannounced for one tick")
	assert.True(t, tries(13, map[string]string{}), "unannounced for backupGrace ticks: rescued")
	assert.False(t, tries(14, map[string]string{}), "once a spell")
	assert.False(t, tries(15, held), "announced again: the spell ends")
	assert.False(t, tries(16, map[string]string{}))
	assert.True(t, tries(18, map[string]string{}), "a new spell")
	assert.False(t, tries(19, nil), "no announcements: the pacing alone")
}

// TestSettleHandoffs: a target handed to j and then held by j's backup,
// while still assigned to j, holds j off; held by another instance, or by
// the backup after the assignment moved it elsewhere, it says nothing of
// j; held by j, it ends j's hold-off.
func TestSettleHandoffs(t *testing.T) {
	members := []string{"a", "b", "c", "j"}
	c, err := New(Config{Provider: newMemProvider(t, newMemStore(), "a", testLeaseTTL), Membership: newMemProvider(t, newMemStore(), "a", testLeaseTTL),
		InstanceID: "a", Targets: func(context.Context) ([]string, error) { return nil, nil }, Poll: func(context.Context, string, uint64) error { return nil }})
	require.NoError(t, err)
	c.members = members
	settle := func(target, holder string, prevAssignee string) int {
		c.targets = map[string]bool{target: true}
		c.handedTo = map[string]handoff{target: {to: "j", tick: 5}}
		c.assign = map[string]string{target: holder}
		c.settleHandoffs(6, map[string]string{target: holder}, map[string]string{target: prevAssignee}, time.Now())
		assert.Empty(t, c.handedTo, "the handoff is settled")
		return c.handbacks["j"].n
	}
	var backedUp, other string
	for _, tg := range targetNames(50) {
		if b := backup(tg, "j", members); b != "a" && backedUp == "" {
			backedUp = tg
		}
	}
	bk := backup(backedUp, "j", members)
	for _, m := range []string{"b", "c"} {
		if m != bk {
			other = m
		}
	}
	assert.Equal(t, 0, settle(backedUp, other, "j"), "held by an instance not j's backup")
	assert.Equal(t, 0, settle(backedUp, bk, other), "held by j's backup after it was assigned elsewhere")
	assert.Equal(t, 1, settle(backedUp, bk, "j"), "held by j's backup while assigned to j")
	c.handbacks["j"] = handback{n: 1} // the hold-off over, its count kept
	assert.Equal(t, 0, settle(backedUp, "j", "j"), "taken by j: the count ends")
}
