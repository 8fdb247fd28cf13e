package redislock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// newClusterProvider returns a Provider on the Redis Cluster of
// DISTLOCK_REDIS_CLUSTER_ADDRS (make test starts a 3-node one).
func newClusterProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	addrs := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_CLUSTER_ADDRS"), ",")
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := New(rdb, append([]Option{WithTTL(testTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The whole suite over a *redis.ClusterClient: each lock's keys share a
// {hash tag}, so every script runs on one node, and the wake-up channel is
// heard cluster-wide.
func TestClusterConformance(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider { return newClusterProvider(t) }
	locktest.TestProvider(t, cfg)
}

// Renewals of locks whose keys live on different nodes (200 names spread
// over the slots): one pipeline per node, and every lock stays held across
// three TTLs. Membership works there too.
func TestClusterRenewAcrossNodes(t *testing.T) {
	p := newClusterProvider(t, WithTTL(time.Second))
	ctx := context.Background()
	var hs []core.Handle
	for range 200 {
		h, err := p.Mutex(uniqueName(t)).TryAcquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	time.Sleep(3 * time.Second) // three TTLs: only renewals keep them
	for _, h := range hs {
		require.NoError(t, h.Context().Err())
		require.NoError(t, h.Release(ctx))
	}
	group := uniqueName(t)
	n, err := p.Members(ctx, group)
	require.NoError(t, err)
	require.Empty(t, n)
	require.NoError(t, p.Register(ctx, group, "a", time.Second))
	n, err = p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, n)
}
