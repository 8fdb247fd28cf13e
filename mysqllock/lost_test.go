package mysqllock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// KILL of the session of a lock: every handle on that connection is lost
// within two keepalive periods, and another Provider can take the names at
// once; the Provider itself keeps working.
func TestKillSessionLosesHandles(t *testing.T) {
	var logged locktest.LogBuffer
	p1, p2 := newProvider(t, WithLogger(logged.Logger())), newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{uniqueName(t, "a"), uniqueName(t, "b")}
	hs := []core.Handle{}
	for _, n := range names {
		h, err := p1.Mutex(n).TryAcquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	sem, err := p1.Semaphore(uniqueName(t, "s"), 1).TryAcquire(ctx)
	require.NoError(t, err)
	hs = append(hs, sem)
	require.Equal(t, connID(t, hs[0]), connID(t, hs[1]), "multiplexed on one connection")
	require.Equal(t, connID(t, hs[0]), connID(t, hs[2]), "multiplexed on one connection")

	start := time.Now()
	kill(t, hs[0])
	for _, h := range hs {
		require.True(t, waitDone(h.Context(), 2*testKeepalive), "not lost within 2 × keepalive")
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	t.Logf("lost after %v", time.Since(start))
	assert.Contains(t, logged.String(), `msg="distlock: connection failed; its locks are lost" backend=mysql locks=3`)
	for _, n := range names {
		h, err := p2.Mutex(n).TryAcquire(ctx)
		require.NoError(t, err, "re-acquire %s at once", n)
		require.NoError(t, h.Release(ctx))
	}
	for _, h := range hs {
		require.NoError(t, h.Release(ctx), "releasing a lost handle")
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	h, err := p1.Mutex(names[0]).Acquire(ctx)
	require.NoError(t, err, "the broken connection does not poison later acquires")
	require.NoError(t, h.Release(ctx))
}

// waitingConn returns the connection of p that runs a blocking wait, once
// one does.
func waitingConn(t *testing.T, p *Provider) *conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range p.sess.Conns() {
			c.Conn.mu.Lock()
			blocking := c.Conn.abort != nil
			c.Conn.mu.Unlock()
			if c.Waiting() && blocking {
				return c
			}
		}
		time.Sleep(5 * time.Millisecond) // polling a state, not waiting out time
	}
	t.Fatal("no blocking wait started within 10s")
	return nil
}

// A wait whose ctx is cancelled ends at once by KILL QUERY, which leaves
// its connection in service: the next grant on it needs no new connection.
func TestCancelledWaitKeepsConnection(t *testing.T) {
	var logged locktest.LogBuffer
	p1, p2 := newProvider(t), newProvider(t, WithLogger(logged.Logger()))
	name := uniqueName(t, "m")
	h1, err := p1.Mutex(name).TryAcquire(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		h, err := p2.Mutex(name).Acquire(ctx)
		if err == nil {
			_ = h.Release(context.Background())
		}
		errc <- err
	}()
	c := waitingConn(t, p2)
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, core.ErrNotAcquired)
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled wait did not end")
	}
	t.Logf("the wait ended %v after the cancel", time.Since(start))
	require.False(t, c.Broken(), "the killed wait's connection was failed: %s", logged.String())

	require.NoError(t, h1.Release(context.Background()))
	h2, err := p2.Mutex(name).Acquire(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, h2.Release(context.Background())) }()
	n := len(p2.sess.Conns())
	require.LessOrEqual(t, n, 2, "connections after a killed wait")
	require.Empty(t, logged.String())
}

// Close ends a blocking wait at once and loses every handle.
func TestCloseInterruptsWait(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	name := uniqueName(t, "m")
	h1, err := p1.Mutex(name).TryAcquire(context.Background())
	require.NoError(t, err)
	defer func() { _ = h1.Release(context.Background()) }()
	errc := make(chan error, 1)
	go func() {
		_, err := p2.Mutex(name).Acquire(context.Background())
		errc <- err
	}()
	waitingConn(t, p2)
	require.NoError(t, p2.Close())
	select {
	case err := <-errc:
		require.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a blocking wait")
	}
}

// Close frees every lock at once: another Provider takes them.
func TestCloseReleasesLocks(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := context.Background()
	var names []string
	for i := range 5 {
		names = append(names, uniqueName(t, fmt.Sprint(i)))
		_, err := p1.Mutex(names[i]).TryAcquire(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, p1.Close())
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, n := range names {
		h, err := p2.Mutex(n).Acquire(wctx)
		require.NoError(t, err)
		require.NoError(t, h.Release(ctx))
	}
}
