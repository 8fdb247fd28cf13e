package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
)

// TestPausedServerDoesNotStallFailedAttempts: with one server of three
// paused while another Provider holds the lock, attempts that fail return
// without waiting for the paused server's reply (the test clients give up
// on a reply after go-redis's 3 s read timeout), a deadline-bounded
// Acquire returns near its deadline, and a waiter gets the lock from the
// two live servers once it is released. Once the server resumes, the
// calls it was holding are answered with give-backs and withdrawals:
// nothing of any of them is left on any server.
func TestPausedServerDoesNotStallFailedAttempts(t *testing.T) {
	procs, clients := ownServers(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := uniqueName(t)
	holder, err := newProvider(t, clients).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	keys := grantKeys(t, clients, holder)
	queue := strings.TrimSuffix(keys.lock, "mutex") + "mutex:q"
	l := newProvider(t, clients).Mutex(name)
	procs[2].pause()
	paused := true
	defer func() {
		if paused {
			procs[2].resume()
		}
	}()

	for i := range 3 {
		start := time.Now()
		_, err = l.TryAcquire(ctx)
		require.ErrorIs(t, err, core.ErrNotAcquired)
		t.Logf("TryAcquire %d failed after %v", i, time.Since(start))
		assert.Less(t, time.Since(start), time.Second, "TryAcquire %d waited for the paused server", i)
	}
	for i := range 3 {
		dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		_, err = l.Acquire(dctx)
		dcancel()
		require.ErrorIs(t, err, core.ErrNotAcquired)
		t.Logf("Acquire %d with a 300 ms deadline failed after %v", i, time.Since(start))
		assert.Less(t, time.Since(start), 1300*time.Millisecond, "Acquire %d with a 300 ms deadline waited for the paused server", i)
	}

	got := make(chan core.Handle, 1)
	go func() {
		h, err := l.Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	require.NoError(t, holder.Release(ctx))
	var h core.Handle
	select {
	case h = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not get the lock from the two live servers")
	}
	require.NotNil(t, h)
	require.NoError(t, h.Release(ctx))

	procs[2].resume()
	paused = false
	require.Eventually(t, func() bool {
		for _, rdb := range clients {
			if rdb.Exists(ctx, keys.lock).Val() != 0 || rdb.ZCard(ctx, queue).Val() != 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 5*time.Millisecond, "a grant or a place in line was left on a server")
}
