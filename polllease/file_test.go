package polllease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/polllease"
	"github.com/distlock/distlock/polllease/pollleasetest"
)

// TestFileBackend runs three instances over one filelock directory, as
// processes on one host would: every target is polled by exactly one of
// them, within capacity, and a graceful stop hands targets over.
func TestFileBackend(t *testing.T) {
	dir := t.TempDir()
	targets := make([]string, 30)
	for i := range targets {
		targets[i] = fmt.Sprintf("endpoint/%02d", i) // a slash is fine in a target
	}

	det := pollleasetest.NewDetector()
	fleet := pollleasetest.NewFleet[*polllease.Coordinator]()
	start := func(id string) {
		p, err := filelock.New(dir)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		c, err := polllease.New(polllease.Config{
			Provider:          p,
			Membership:        p,
			Group:             "file-test",
			InstanceID:        id,
			HeartbeatTTL:      2 * time.Second,
			HeartbeatInterval: 500 * time.Millisecond,
			ReconcileInterval: 250 * time.Millisecond,
			MinHold:           250 * time.Millisecond,
			Targets:           func(context.Context) ([]string, error) { return targets, nil },
			Poll:              det.PollFunc(id, pollleasetest.Sleep(5*time.Millisecond)),
			PollInterval:      func(string) time.Duration { return 50 * time.Millisecond },
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		require.NoError(t, err)
		fleet.Add(id, c, pollleasetest.Run(c.Run))
	}
	for _, id := range []string{"a", "b", "c"} {
		start(id)
	}
	defer func() {
		for _, id := range fleet.IDs() {
			assert.NoError(t, fleet.Stop(id))
		}
		assert.Empty(t, det.Violations())
	}()
	// Balanced: every target held once, every instance within the load
	// bounds, so the assignment from the current owners moves nothing.
	balanced := func() bool {
		ids := fleet.IDs()
		floor := polllease.Floor(len(targets), len(ids), polllease.DefaultLoadFactor)
		limit := polllease.Capacity(len(targets), len(ids), polllease.DefaultLoadFactor)
		n := 0
		for _, id := range ids {
			c, ok := fleet.Get(id)
			if !ok {
				return false
			}
			owned := c.Owned()
			if len(owned) < floor || len(owned) > limit {
				return false
			}
			for _, tg := range owned {
				if !c.IsOwned(tg) {
					return false
				}
			}
			n += len(owned)
		}
		return n == len(targets) && fleet.Covered(targets)
	}
	require.Eventually(t, balanced, 15*time.Second, 10*time.Millisecond)
	for _, id := range fleet.IDs() {
		c, _ := fleet.Get(id)
		assert.LessOrEqual(t, len(c.Owned()), polllease.Capacity(len(targets), 3, polllease.DefaultLoadFactor))
	}

	require.NoError(t, fleet.Stop("b"))
	require.Eventually(t, balanced, 15*time.Second, 10*time.Millisecond)
	a, _ := fleet.Get("a")
	assert.Equal(t, []string{"a", "c"}, a.Members())
}
