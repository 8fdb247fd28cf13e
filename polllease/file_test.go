package polllease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/polllease"
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

	var mu sync.Mutex
	active := map[string]string{}
	var overlaps []string
	poll := func(id string) func(context.Context, string, uint64) error {
		return func(ctx context.Context, target string, token uint64) error {
			mu.Lock()
			if other, ok := active[target]; ok {
				overlaps = append(overlaps, target+": "+other+" and "+id)
			}
			active[target] = id
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
			mu.Lock()
			delete(active, target)
			mu.Unlock()
			return nil
		}
	}

	type instance struct {
		c      *polllease.Coordinator
		cancel context.CancelFunc
		done   chan error
	}
	start := func(id string) *instance {
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
			Poll:              poll(id),
			PollInterval:      func(string) time.Duration { return 50 * time.Millisecond },
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		in := &instance{c: c, cancel: cancel, done: make(chan error, 1)}
		go func() { in.done <- c.Run(ctx) }()
		return in
	}
	stop := func(in *instance) error {
		in.cancel()
		return <-in.done
	}

	fleet := map[string]*instance{"a": start("a"), "b": start("b"), "c": start("c")}
	defer func() {
		for _, in := range fleet {
			assert.NoError(t, stop(in))
		}
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, overlaps)
	}()
	balanced := func() bool {
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range fleet {
				if !yield(id) {
					return
				}
			}
		})
		assign := polllease.Assign(targets, ids, polllease.DefaultLoadFactor)
		n := 0
		for id, in := range fleet {
			for _, tg := range in.c.Owned() {
				if assign[tg] != id || !in.c.IsOwned(tg) {
					return false
				}
				n++
			}
		}
		return n == len(targets)
	}
	require.Eventually(t, balanced, 15*time.Second, 10*time.Millisecond)
	for _, in := range fleet {
		assert.LessOrEqual(t, len(in.c.Owned()), polllease.Capacity(len(targets), 3, polllease.DefaultLoadFactor))
	}

	require.NoError(t, stop(fleet["b"]))
	delete(fleet, "b")
	require.Eventually(t, balanced, 15*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a", "c"}, fleet["a"].c.Members())
}
