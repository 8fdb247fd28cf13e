package tests

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/tests/internal/launch"
)

// The tests below run redislock through a real failover: a master, its
// replica and three Sentinels (launch.Sentinel), clients made with
// redis.NewFailoverClient, the master killed with SIGKILL and the replica
// promoted by the Sentinels' vote. They run in parallel with each other,
// each on a deployment of its own.

// stTTL is the lease of the Sentinel tests: well above a failover (about
// 2.5 s: a second to call the master down, then the vote and the
// promotion), so that a holder's renewals reach the promoted replica
// within its trust window.
const stTTL = 10 * time.Second

// stAck is the replica acknowledgment of the tests that use it: one
// replica, within a second.
func stAck() redislock.Option { return redislock.WithReplicaAck(1, time.Second) }

// stClient is a failover client of s.
func stClient(t *testing.T, s *launch.RedisSentinel) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: launch.SentinelMaster, SentinelAddrs: s.Sentinels,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// stProvider is a Provider on a failover client of its own.
func stProvider(t *testing.T, s *launch.RedisSentinel, opts ...redislock.Option) *redislock.Provider {
	t.Helper()
	p, err := redislock.New(stClient(t, s), append([]redislock.Option{redislock.WithTTL(stTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// direct is a client of srv alone.
func direct(t *testing.T, srv launch.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// stStart starts a Sentinel deployment and returns it with its master and
// replica.
func stStart(t *testing.T) (s *launch.RedisSentinel, master, replica launch.Server) {
	t.Helper()
	s = launch.Sentinel(t)
	master = s.Master(t, 10*time.Second)
	replica = s.Servers[0]
	if replica == master {
		replica = s.Servers[1]
	}
	return s, master, replica
}

// cutReplica cuts the replica's link just before a grant: it is made to
// follow a master that is not there, so nothing written on the real master
// from now on reaches it (the Sentinels would repair that only after their
// failover timeout, and only while the master is up).
func cutReplica(t *testing.T, replica launch.Server) {
	t.Helper()
	require.NoError(t, direct(t, replica).ReplicaOf(context.Background(), "127.0.0.1", "1").Err())
}

// failover kills master right away and waits until the Sentinels have
// promoted replica.
func stFailover(t *testing.T, s *launch.RedisSentinel, master, replica launch.Server) {
	t.Helper()
	master.Kill(t)
	require.Equal(t, replica, s.WaitFailover(t, master, 60*time.Second), "the Sentinels promoted another server")
}

func mutexKey(name, suffix string) string {
	return redislock.DefaultPrefix + "{" + kit.SafeName(name) + "}:" + suffix
}

// TestSentinelFailoverHazard is the hazard that WithReplicaAck removes,
// shown on a real failover: without it, a grant the replica had not got
// when the master died is not on the promoted replica, and a second client
// takes the lock while the first holder's handle is live (until the
// first's next renewal finds the grant gone: its renewal interval is long
// here, so that the overlap is certain to be seen).
func TestSentinelFailoverHazard(t *testing.T) {
	t.Parallel() // each has its own deployment, and waits on Sentinel's timers most of the time
	ctx := context.Background()
	s, master, replica := stStart(t)
	p1 := stProvider(t, s, redislock.WithTTL(60*time.Second), redislock.WithRenewInterval(20*time.Second))

	cutReplica(t, replica)
	h1, err := p1.Mutex("m").TryAcquire(ctx)
	require.NoError(t, err, "without replica acknowledgment the grant does not wait for the replica")
	stFailover(t, s, master, replica)

	n, err := direct(t, replica).Exists(ctx, mutexKey("m", "mutex")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the promoted replica has the grant: the cut did not keep it from the replica, the test shows nothing")
	h2, err := stProvider(t, s).Mutex("m").TryAcquire(ctx)
	require.NoError(t, err, "the promoted replica refused a second client although it lacks the grant")
	assert.NoError(t, h1.Context().Err(), "the first holder's handle ended before the second client was granted")
	require.NoError(t, h2.Release(ctx))
	_ = h1.Release(ctx)
}

// TestSentinelReplicaAckCut: with replica acknowledgment, a grant made
// while the replica's link is cut is given back and reported, so no
// client holds a handle to a grant the promoted replica lacks.
func TestSentinelReplicaAckCut(t *testing.T) {
	t.Parallel() // each has its own deployment, and waits on Sentinel's timers most of the time
	ctx := context.Background()
	s, master, replica := stStart(t)
	p1 := stProvider(t, s, stAck())

	cutReplica(t, replica)
	h, err := p1.Mutex("m").TryAcquire(ctx)
	if err == nil {
		_ = h.Release(ctx)
	}
	require.ErrorIs(t, err, core.ErrNotAcquired, "a grant the replica did not acknowledge was handed out")
	assert.Contains(t, err.Error(), "acknowledged by 0 of 1 replicas")
	stFailover(t, s, master, replica)

	n, err := direct(t, replica).Exists(ctx, mutexKey("m", "mutex")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the promoted replica has the grant: the cut did not keep it from the replica")
	s.Rejoin(t, master, 30*time.Second) // a replica again, to acknowledge
	h2, err := stProvider(t, s, stAck()).Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h2.Release(ctx))
}

// TestSentinelReplicaAckFailover: a grant acknowledged by the replica
// survives the master's death right after it: the promoted replica
// refuses a second client, the holder's renewals reach it and its handle
// stays live. The next token is larger even where the promoted replica's
// clock is behind every token the old master drew: the old master's tokens
// are pushed 10 s ahead of the clock here, as a master whose clock runs
// 10 s ahead would draw them (one machine runs both servers, so a slow
// replica clock cannot be had directly), and the floor that keeps the next
// token above them is the name's counter, acknowledged with the grant.
func TestSentinelReplicaAckFailover(t *testing.T) {
	t.Parallel() // each has its own deployment, and waits on Sentinel's timers most of the time
	ctx := context.Background()
	s, master, replica := stStart(t)
	renewed := make(renewals, 1)
	p1 := stProvider(t, s, stAck(), redislock.WithObserver(renewed))

	ahead := uint64(time.Now().Add(10 * time.Second).UnixMicro())
	require.NoError(t, direct(t, master).Set(ctx, mutexKey("m", "counter"), strconv.FormatUint(ahead, 10), 0).Err())
	h1, err := p1.Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, h1.FencingToken(), ahead, "the grant's token is not above the name's counter")
	stFailover(t, s, master, replica)

	counter, err := direct(t, replica).Get(ctx, mutexKey("m", "counter")).Uint64()
	require.NoError(t, err, "the promoted replica lacks the name's counter")
	require.GreaterOrEqual(t, counter, h1.FencingToken(), "the promoted replica's counter is below the acknowledged grant's token")
	require.Less(t, uint64(time.Now().UnixMicro()), h1.FencingToken(), "the promoted replica's clock is not behind the token: the test shows nothing")

	p2 := stProvider(t, s, stAck())
	_, err = p2.Mutex("m").TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "the promoted replica let a second client in")
	s.Rejoin(t, master, 30*time.Second)
	renewed.await(t, stTTL) // a renewal that reached the promoted replica
	require.NoError(t, h1.Context().Err(), "the holder lost its lock across the failover")
	_, err = p2.Mutex("m").TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a second client got the lock while the first's handle was live")

	require.NoError(t, h1.Release(ctx))
	h2, err := p2.Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken(), "the token went back across the failover")
	require.NoError(t, h2.Release(ctx))
}

// TestSentinelWaiterRidesFailover: an Acquire that waits while the master
// dies and the replica is promoted carries on waiting (its attempts meet
// refused connections meanwhile) and gets the lock when the holder
// releases it on the new master, with a larger token.
func TestSentinelWaiterRidesFailover(t *testing.T) {
	t.Parallel() // each has its own deployment, and waits on Sentinel's timers most of the time
	ctx := context.Background()
	s, master, replica := stStart(t)
	h1, err := stProvider(t, s, stAck()).Mutex("m").TryAcquire(ctx)
	require.NoError(t, err)

	p2 := stProvider(t, s, stAck())
	type result struct {
		h   core.Handle
		err error
	}
	got := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		h, err := p2.Mutex("m").Acquire(wctx)
		got <- result{h, err}
	}()
	queue := direct(t, master)
	require.Eventually(t, func() bool { return queue.ZCard(ctx, mutexKey("m", "mutex:q")).Val() == 1 },
		10*time.Second, 5*time.Millisecond, "the waiter did not queue")

	stFailover(t, s, master, replica)
	s.Rejoin(t, master, 30*time.Second)
	select {
	case r := <-got:
		t.Fatalf("Acquire returned while the lock was held: %v", r.err)
	default:
	}
	require.NoError(t, h1.Context().Err(), "the holder lost its lock across the failover")
	require.NoError(t, h1.Release(ctx))
	select {
	case r := <-got:
		require.NoError(t, r.err, "the waiter failed instead of riding through the failover")
		assert.Greater(t, r.h.FencingToken(), h1.FencingToken())
		require.NoError(t, r.h.Release(ctx))
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not get the lock within 30 s of its release")
	}
}

// renewals hears the successful lease renewals of a Provider.
type renewals chan struct{}

func (r renewals) Observe(_ context.Context, e core.Event) {
	if e.Kind == core.EventRenew && e.Err == nil {
		select {
		case r <- struct{}{}:
		default:
		}
	}
}

// await waits for a renewal that succeeds from now on.
func (r renewals) await(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-r: // one before now
	default:
	}
	select {
	case <-r:
	case <-time.After(within):
		t.Fatalf("no lease renewal succeeded within %v", within)
	}
}
