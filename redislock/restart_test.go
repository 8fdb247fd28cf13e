package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerRestartUnderHolder(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	p, err := New(rdb, WithTTL(testTTL))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	lockers := []core.Locker{p.Mutex("m"), p.RWMutex("rw"), p.RWMutex("r").RLocker(), p.Semaphore("s", 3)}
	var handles []core.Handle
	for _, l := range lockers {
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		handles = append(handles, h)
	}

	// The server dies with every grant (no persistence) and comes back.
	srv.Kill()
	for _, h := range handles {
		// Renewals fail from now on: the handle is lost when its trust
		// window (start + TTL − margin) closes, within one TTL.
		waitDone(t, h.Context(), testTTL+time.Second)
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	srv.Start()

	for i, l := range lockers {
		// The driver reports the dial error it last saw until its
		// background re-dial succeeds (about a second).
		var h core.Handle
		require.Eventually(t, func() bool {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			h, err = l.Acquire(actx)
			return err == nil
		}, 15*time.Second, 50*time.Millisecond, "acquire again after the restart")
		assert.Greater(t, h.FencingToken(), handles[i].FencingToken(), "tokens keep increasing across a restart that lost the data")
		require.NoError(t, h.Release(ctx))
		require.NoError(t, handles[i].Release(ctx), "releasing the lost handle is harmless")
	}
}

func TestWaiterRidesThroughRestart(t *testing.T) {
	srv := redistest.StartServer(t)
	newP := func() *Provider {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		p, err := New(rdb, WithTTL(testTTL))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	holder, waiter := newP(), newP()
	ctx := context.Background()
	h, err := holder.Mutex("m").Acquire(ctx)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	type result struct {
		h   core.Handle
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := waiter.Mutex("m").Acquire(wctx)
		got <- result{h, err}
	}()
	// The waiter is queued on the server: it has tried once and waits.
	queue := waiter.client.Key(waiter.client.Prepare(redisop.Lock{Kind: redisop.KindMutex, Name: "m"})) + ":q"
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	require.Eventually(t, func() bool { return rdb.Exists(ctx, queue).Val() == 1 }, 5*time.Second, 5*time.Millisecond)

	// The server dies with every grant and stays down for several of the
	// waiter's retries: the waiter carries on and gets the lock once the
	// server is back.
	srv.Kill()
	waitDone(t, h.Context(), testTTL+time.Second)
	srv.Start()
	r := <-got
	require.NoError(t, r.err, "the waiter failed instead of riding through the restart")
	assert.Greater(t, r.h.FencingToken(), h.FencingToken())
	require.NoError(t, r.h.Release(ctx))
	_ = h.Release(ctx)
}
