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

// countedProvider returns a Provider on a client of its own whose round
// trips hook counts.
func countedProvider(t *testing.T) (*Provider, *redis.Client, *roundTrips) {
	rdb := redistest.Client(t, redistest.Addr(t))
	hook := &roundTrips{}
	rdb.AddHook(hook)
	p, err := New(rdb, WithTTL(testTTL))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, rdb, hook
}

func TestHeartbeat(t *testing.T) {
	p, rdb, hook := countedProvider(t)
	ctx := context.Background()
	group := uniqueName(t)
	t.Cleanup(func() { _ = rdb.Del(ctx, keyBase(p, group)+"members").Err() })

	// A first call loads the script (EVALSHA, then EVAL): count from the
	// second.
	members, err := core.Heartbeat(ctx, p, group, "b", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, members, "the caller is listed at once")

	require.NoError(t, p.Register(ctx, group, "c", 50*time.Millisecond))
	hook.single.Store(0)
	hook.pipelines.Store(0)
	members, err = core.Heartbeat(ctx, p, group, "a", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(1), hook.single.Load()+hook.pipelines.Load(), "one round trip")
	assert.Subset(t, []string{"a", "b", "c"}, members)
	assert.Contains(t, members, "a")
	assert.IsNonDecreasing(t, members, "sorted")

	// The same key as Register and Members: c drops out by the server's
	// clock, and Members sees what Heartbeat registered.
	require.Eventually(t, func() bool {
		members, err = p.Heartbeat(ctx, group, "a", time.Minute)
		return err == nil && len(members) == 2
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a", "b"}, members)
	listed, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, members, listed)

	require.NoError(t, p.Deregister(ctx, group, "a"))
	listed, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, listed)

	_, err = p.Heartbeat(ctx, group, "", time.Minute)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = p.Heartbeat(ctx, group, "a", time.Microsecond)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = p.Heartbeat(ctx, "", "a", time.Minute)
	require.ErrorIs(t, err, core.ErrInvalidName)
}
