package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/tests/internal/launch"
)

const foTTL = 2 * time.Second

// foPair starts a master and a replica of it (no persistence) and returns
// them with a client of each, once the replica's link is up.
func foPair(t *testing.T) (master, replica launch.Server, mc, rc *redis.Client) {
	t.Helper()
	master, replica = launch.Redis(t, launch.RedisConfig{}), launch.Redis(t, launch.RedisConfig{})
	mc = redis.NewClient(&redis.Options{Addr: master.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	rc = redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = mc.Close(); _ = rc.Close() })
	ctx := context.Background()
	host, port, _ := strings.Cut(master.Addr(), ":")
	require.NoError(t, rc.SlaveOf(ctx, host, port).Err())
	require.Eventually(t, func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond, "the replica did not connect")
	return master, replica, mc, rc
}

func foProvider(t *testing.T, rdb *redis.Client, opts ...redislock.Option) *redislock.Provider {
	t.Helper()
	p, err := redislock.New(rdb, append([]redislock.Option{redislock.WithTTL(foTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// failover kills the master and promotes the replica, as Sentinel would.
func failover(t *testing.T, master launch.Server, rc *redis.Client) {
	t.Helper()
	master.Kill(t)
	require.NoError(t, rc.SlaveOf(context.Background(), "NO", "ONE").Err())
}

// TestRedisReplicaAck: with replica acknowledgment, a grant the replica
// has not got is not a grant (it is given back and reported), and a grant
// that was confirmed survives the master's death: the promoted replica
// refuses a second client while the first holds the lock.
func TestRedisReplicaAck(t *testing.T) {
	ctx := context.Background()
	master, replica, mc, rc := foPair(t)
	p := foProvider(t, mc, redislock.WithReplicaAck(1, 300*time.Millisecond))

	// The replica is frozen: the grant cannot be acknowledged.
	replica.Pause(t)
	_, err := p.Mutex("cut").TryAcquire(ctx)
	replica.Resume(t)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.Contains(t, err.Error(), "acknowledged by 0 of 1 replicas")
	h, err := foProvider(t, mc).Mutex("cut").TryAcquire(ctx)
	require.NoError(t, err, "the unacknowledged grant was not given back")
	require.NoError(t, h.Release(ctx))

	// A confirmed grant, then the master dies at once.
	h1, err := p.Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)
	failover(t, master, rc)
	p2 := foProvider(t, rc)
	_, err = p2.Mutex("m").TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "the promoted replica let a second client in")
	require.NoError(t, h1.Context().Err())

	// The first holder cannot renew on the dead master: its lease ends,
	// then the lock expires on the new master and the next token is larger.
	waitCtx, cancel := context.WithTimeout(ctx, 3*foTTL)
	defer cancel()
	h2, err := p2.Mutex("m").Acquire(waitCtx)
	require.NoError(t, err)
	assert.Error(t, h1.Context().Err(), "the second client got the lock while the first's handle was live")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, h2.Release(ctx))
}

// TestRedisFailoverWithoutReplicaAck shows the hazard replica
// acknowledgment removes: a grant the replica had not got when the master
// died is not on the promoted replica, and a second client takes the lock
// while the first holder's handle is live.
func TestRedisFailoverWithoutReplicaAck(t *testing.T) {
	ctx := context.Background()
	master, _, mc, rc := foPair(t)
	// The replica's link is cut just before the grant: it follows a
	// master that is not there, and the grant never reaches it.
	require.NoError(t, rc.SlaveOf(ctx, "127.0.0.1", "1").Err())
	h1, err := foProvider(t, mc).Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)
	failover(t, master, rc)
	h2, err := foProvider(t, rc).Mutex("m").TryAcquire(ctx)
	require.NoError(t, err, "the promoted replica had the grant: the test no longer shows the hazard")
	assert.NoError(t, h1.Context().Err(), "two live handles at once")
	require.NoError(t, h2.Release(ctx))
}
