package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/internal/redistest"
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
