package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pg_terminate_backend on the connection of a lock: every handle on that
// connection is lost within two keepalive periods, and another Provider can
// take the names at once; the Provider itself keeps working.
func TestTerminateBackendLosesHandles(t *testing.T) {
	var logged locktest.LogBuffer
	p1, p2 := newProvider(t, WithLogger(logged.Logger())), newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{uniqueName(t, "a"), uniqueName(t, "b")}
	var hs []core.Handle
	for _, n := range names {
		h, err := p1.Mutex(n).TryAcquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	require.Equal(t, backendPID(t, hs[0]), backendPID(t, hs[1]), "multiplexed on one connection")

	start := time.Now()
	terminate(t, hs[0])
	for _, h := range hs {
		require.True(t, waitDone(h.Context(), 2*testKeepalive), "not lost within 2 × keepalive")
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	t.Logf("lost after %v", time.Since(start))
	assert.Contains(t, logged.String(), `msg="distlock: connection failed; its locks are lost" backend=postgres locks=2`)
	for _, n := range names {
		h, err := p2.Mutex(n).TryAcquire(ctx)
		require.NoError(t, err, "re-acquire %s at once", n)
		require.NoError(t, h.Release(ctx))
	}
	for _, h := range hs {
		require.NoError(t, h.Release(ctx), "releasing a lost handle")
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	// The broken connection does not poison later acquires.
	h, err := p1.Mutex(names[0]).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx))
}

// A terminated idle connection is replaced on the next acquire instead of
// failing it.
func TestBrokenIdleConnectionIsReplaced(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	pid := backendPID(t, h)
	require.NoError(t, h.Release(ctx))
	_, err = newPool(t).Exec(ctx, "SELECT pg_terminate_backend($1)", int64(pid))
	require.NoError(t, err)
	h, err = p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, pid, backendPID(t, h))
	require.NoError(t, h.Release(ctx))
}

// Close releases every held lock at once and loses the handles.
func TestCloseReleasesLocks(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	h, err := p1.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p1.Close())
	require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h2, err := p2.Mutex(name).Acquire(wctx)
	require.NoError(t, err)
	require.NoError(t, h2.Release(ctx))
	_, err = p1.Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, errClosed)
}

// A dead server gives the driver's error promptly, not a wait.
func TestDeadServer(t *testing.T) {
	pool := newPool(t)
	cfg := pool.Config()
	cfg.ConnConfig.Port = 1 // nothing listens there
	cfg.ConnConfig.Fallbacks = nil
	dead, err := pgxpoolNew(cfg)
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	p := newProviderOn(t, dead)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range []core.Locker{p.Mutex("x"), p.Semaphore("x", 2)} {
		start := time.Now()
		_, err := l.Acquire(ctx)
		require.Error(t, err)
		assert.NotErrorIs(t, err, core.ErrNotAcquired)
		var e *core.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "postgres", e.Backend)
		assert.Less(t, time.Since(start), 10*time.Second)
	}
}

// Close ends a blocking wait at once.
func TestCloseInterruptsWait(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	h, err := p2.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	defer h.Release(ctx)
	errc := make(chan error, 1)
	go func() { _, err := p1.Mutex(name).Acquire(ctx); errc <- err }()
	pool := newPool(t)
	require.Eventually(t, func() bool { return waitingOn(pool, name) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p1.Close())
	select {
	case err := <-errc:
		require.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waiting after Close")
	}
}
