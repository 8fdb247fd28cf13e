package polllease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// TestReleaseOfLostLeaseReportsLost: a lease whose handle context ended
// before it was given up (lost on the store, or its trust window closed
// by the clock, before the sweep reported it) is reported EventLost with
// the loss's cause, and the release does not fail for it; a live lease is
// reported EventReleased with the reason.
func TestReleaseOfLostLeaseReportsLost(t *testing.T) {
	f := newFleet(t, targetNames(2))
	c, err := New(f.config("solo", newMemProvider(t, f.store, "solo", testLeaseTTL)))
	require.NoError(t, err)
	failing := func(context.Context) error { return fmt.Errorf("%w: not held", core.ErrLockLost) }
	gone := kit.NewHandle(7, failing)
	gone.Lose(fmt.Errorf("%w: taken over", core.ErrLockLost))
	live := kit.NewHandle(8, func(context.Context) error { return nil })
	start := time.Now()

	err = c.releaseAll(context.Background(), []*lease{{target: "lost", h: gone, token: 7}, {target: "live", h: live, token: 8}}, ReasonRebalance)
	require.NoError(t, err, "a lease lost before its release is not a failed release")
	byTarget := map[string]Event{}
	for _, e := range f.events.Where(func(e Event) bool { return !e.Time.Before(start) }) {
		byTarget[e.Target] = e
	}
	require.Len(t, byTarget, 2)
	assert.Equal(t, EventLost, byTarget["lost"].Kind)
	assert.True(t, errors.Is(byTarget["lost"].Err, core.ErrLockLost), "cause: %v", byTarget["lost"].Err)
	assert.Equal(t, uint64(7), byTarget["lost"].Token)
	assert.Equal(t, EventReleased, byTarget["live"].Kind)
	assert.Equal(t, ReasonRebalance, byTarget["live"].Reason)
	assert.NoError(t, byTarget["live"].Err)
}
