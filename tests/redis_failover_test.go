package tests

import (
	"context"
	"strconv"
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
	t.Parallel() // own servers or names; waits on events only
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
	t.Parallel() // own servers or names; waits on events only
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

// TestRedisReplicaAckCounterFloor: under replica acknowledgment every way
// a token is drawn (a free mutex, a handoff by the server's release, a
// local handoff, the write and read sides, a semaphore) draws it above the
// name's counter and raises the counter to it, and the replica has the
// counter once the grant is acknowledged. The counter starts a minute
// ahead of the clock here, as the tokens of a master whose clock ran a
// minute ahead of its replica's would leave it.
func TestRedisReplicaAckCounterFloor(t *testing.T) {
	t.Parallel() // own servers or names; waits on events only
	ctx := context.Background()
	master, _, mc, rc := foPair(t)
	ack := redislock.WithReplicaAck(1, time.Second)
	seen := make(handoffs, 8)
	p1, p2 := foProvider(t, mc, ack), foProvider(t, mc, ack, redislock.WithObserver(seen))
	last := uint64(time.Now().Add(time.Minute).UnixMicro())
	require.NoError(t, mc.Set(ctx, mutexKey("n", "counter"), strconv.FormatUint(last, 10), 0).Err())
	above := func(what string, h core.Handle) {
		t.Helper()
		assert.Greater(t, h.FencingToken(), last, "%s: token not above the counter", what)
		last = max(last, h.FencingToken())
		counter, err := rc.Get(ctx, mutexKey("n", "counter")).Uint64()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, counter, h.FencingToken(), "%s: the replica's counter is below the acknowledged token", what)
	}
	acquire := func(what string, l core.Locker) core.Handle {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h, err := l.Acquire(wctx)
		require.NoError(t, err, what)
		above(what, h)
		return h
	}
	// Handoffs: a waiter of another Provider, then one of the holder's.
	h := acquire("free mutex", p1.Mutex("n"))
	handed := make(chan core.Handle, 2)
	go func() { h, _ := p2.Mutex("n").Acquire(ctx); handed <- h }()
	require.Eventually(t, func() bool { return mc.ZCard(ctx, mutexKey("n", "mutex:q")).Val() == 1 },
		10*time.Second, 5*time.Millisecond, "the waiter did not queue")
	require.NoError(t, h.Release(ctx))
	h = <-handed
	require.NotNil(t, h, "the server's handoff failed")
	above("handoff by the server", h)
	seen.drain()
	go func() { h, _ := p2.Mutex("n").Acquire(ctx); handed <- h }()
	seen.await(t, core.EventWait) // in p2's line, behind h, or about to be
	require.NoError(t, h.Release(ctx))
	h = <-handed
	require.NotNil(t, h, "the local handoff failed")
	above("handoff within the Provider", h)
	t.Logf("the second grant was handed over by %q", seen.await(t, core.EventAcquire).Handoff)
	require.NoError(t, h.Release(ctx))

	for _, l := range []struct {
		what string
		l    core.Locker
	}{{"write side", p1.RWMutex("n")}, {"read side", p1.RWMutex("n").RLocker()}, {"semaphore", p1.Semaphore("n", 2)}} {
		require.NoError(t, acquire(l.what, l.l).Release(ctx))
	}

	failover(t, master, rc)
	counter, err := rc.Get(ctx, mutexKey("n", "counter")).Uint64()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, counter, last, "the promoted replica's counter is below the last token")
}

// handoffs hears a Provider's wait and acquire events.
type handoffs chan core.Event

func (h handoffs) Observe(_ context.Context, e core.Event) {
	if e.Kind == core.EventWait || e.Kind == core.EventAcquire {
		select {
		case h <- e:
		default: // never block the Provider
		}
	}
}

func (h handoffs) drain() {
	for {
		select {
		case <-h:
		default:
			return
		}
	}
}

// await returns the next event of kind k.
func (h handoffs) await(t *testing.T, k core.EventKind) core.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-h:
			if e.Kind == k {
				return e
			}
		case <-deadline:
			t.Fatalf("no event %v within 10 s", k)
		}
	}
}
