package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/distlock/distlock/redlock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"))
}

const testTTL = 3 * time.Second

func newProvider(t testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Provider {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithTTL(testTTL), redlock.WithMinValidity(testTTL - time.Second)}, opts...)
	p, err := redlock.New(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func uniqueName(t testing.TB) string {
	return fmt.Sprintf("%s/%08x", t.Name(), rand.Uint32())
}

// breakGrant deletes the lock's keys on a majority of the servers. It first
// waits for the grant to reach every server: an acquire returns once a
// majority granted, and a late grant landing after the delete would make
// the majority whole again.
func breakGrant(clients []redis.UniversalClient) func(t testing.TB, h core.Handle) {
	return func(t testing.TB, h core.Handle) {
		key := grantKeys(t, clients, h).lock
		for _, rdb := range clients[:len(clients)/2+1] {
			require.NoError(t, rdb.Del(context.Background(), key).Err())
		}
	}
}

func TestConformance(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			locktest.TestProvider(t, locktest.Config{
				New: func(t testing.TB) core.Provider {
					return newProvider(t, sharedClients(t, n))
				},
				Break: func(t testing.TB, h core.Handle) {
					breakGrant(sharedClients(t, n))(t, h)
				},
				Observed: func(t testing.TB, o core.Observer) core.Provider {
					return newProvider(t, sharedClients(t, n), redlock.WithObserver(o))
				},
				LostWithin:    testTTL,
				AbandonWithin: testTTL,
			})
		})
	}
}

func BenchmarkProvider(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			locktest.BenchmarkProvider(b, locktest.Config{
				New: func(t testing.TB) core.Provider { return newProvider(t, sharedClients(t, n)) },
			})
		})
	}
}

func TestNewBadInput(t *testing.T) {
	one := []redis.UniversalClient{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}
	defer one[0].Close()
	for _, tc := range []struct {
		name    string
		clients []redis.UniversalClient
		opts    []redlock.Option
	}{
		{"no clients", nil, nil},
		{"nil client", []redis.UniversalClient{nil}, nil},
		{"nil *redis.Client", []redis.UniversalClient{(*redis.Client)(nil)}, nil},
		{"zero TTL", one, []redlock.Option{redlock.WithTTL(0)}},
		{"negative TTL", one, []redlock.Option{redlock.WithTTL(-time.Second)}},
		{"absurd TTL", one, []redlock.Option{redlock.WithTTL(1000 * time.Hour)}},
		{"min validity ≥ TTL", one, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithMinValidity(time.Second)}},
		{"negative drift", one, []redlock.Option{redlock.WithDriftMargin(-time.Millisecond)}},
		{"interval ≥ TTL", one, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithRenewInterval(time.Second)}},
		{"restart guard < TTL", one, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithRestartGuard(time.Second / 2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := redlock.New(tc.clients, tc.opts...)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			require.Nil(t, p)
		})
	}
}

func TestSemaphoreUnsupportedOverSeveralServers(t *testing.T) {
	p := newProvider(t, sharedClients(t, 3))
	_, err := p.Semaphore(uniqueName(t), 2).TryAcquire(context.Background())
	require.ErrorIs(t, err, core.ErrUnsupported)
}

func TestMinorityLoss(t *testing.T) {
	procs, clients := ownServers(t, 5)
	p := newProvider(t, clients)
	procs[0].kill()
	procs[3].kill()
	ctx := context.Background()
	l := p.Mutex(uniqueName(t))
	h, err := l.TryAcquire(ctx)
	require.NoError(t, err, "2 of 5 servers down must not stop an acquire")
	// Outlive several extensions: the lease is kept on the surviving majority.
	time.Sleep(testTTL + testTTL/2)
	require.NoError(t, h.Context().Err(), "lost although a majority extends it: %v", context.Cause(h.Context()))
	require.NoError(t, h.Release(ctx))
	h2, err := l.TryAcquire(ctx)
	require.NoError(t, err, "released lock not free")
	require.NoError(t, h2.Release(ctx))
}

func TestMajorityLoss(t *testing.T) {
	procs, clients := ownServers(t, 5)
	p := newProvider(t, clients)
	ctx := context.Background()
	holder, err := p.Mutex(uniqueName(t)).TryAcquire(ctx)
	require.NoError(t, err)
	lostAt := time.Now()
	for _, i := range []int{1, 2, 4} {
		procs[i].kill()
	}

	// A new acquire fails within the budget, naming the dead servers.
	start := time.Now()
	_, err = p.Mutex(uniqueName(t)).TryAcquire(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, core.ErrNotAcquired, "dead servers are not a busy lock")
	assert.Less(t, time.Since(start), 2*time.Second, "did not fail within the acquire budget (1s)")
	for _, i := range []int{1, 2, 4} {
		assert.Contains(t, err.Error(), procs[i].addr, "error does not name dead server %d", i)
	}

	// The holder's context ends within the trust window.
	select {
	case <-holder.Context().Done():
		assert.ErrorIs(t, context.Cause(holder.Context()), core.ErrLockLost)
		assert.Less(t, time.Since(lostAt), testTTL+time.Second)
	case <-time.After(testTTL + 2*time.Second):
		t.Fatal("holder not lost after a majority of servers died")
	}
	_ = holder.Release(ctx)
}

func TestPausedServerDoesNotStallQuorum(t *testing.T) {
	procs, clients := ownServers(t, 5)
	p := newProvider(t, clients)
	procs[2].pause()
	defer procs[2].resume()
	ctx := context.Background()
	for i := range 5 {
		start := time.Now()
		h, err := p.Mutex(uniqueName(t)).TryAcquire(ctx)
		require.NoError(t, err, "attempt %d with one server paused", i)
		assert.Less(t, time.Since(start), time.Second, "acquire waited for the paused server (budget is 1s)")
		require.NoError(t, h.Release(ctx))
	}
}

func TestMajorityKeysDeleted(t *testing.T) {
	clients := sharedClients(t, 5)
	p := newProvider(t, clients)
	h, err := p.Mutex(uniqueName(t)).TryAcquire(context.Background())
	require.NoError(t, err)
	breakGrant(clients)(t, h)
	select {
	case <-h.Context().Done():
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	case <-time.After(testTTL):
		t.Fatal("not lost at the next extension")
	}
	_ = h.Release(context.Background())
}

func TestFencingAcrossDisagreeingCounters(t *testing.T) {
	clients := sharedClients(t, 5)
	p := newProvider(t, clients)
	ctx := context.Background()
	name := uniqueName(t)
	l := p.Mutex(name)
	h, err := l.TryAcquire(ctx)
	require.NoError(t, err)
	first := h.FencingToken()
	require.NoError(t, h.Release(ctx))

	// Push one server's counter far ahead, as if it had served grants the
	// others never saw: the next token must still exceed every earlier one,
	// and the write-back must bring a majority up to it.
	c, err := redisop.NewClient(clients[4], redlock.DefaultPrefix)
	require.NoError(t, err)
	require.NoError(t, c.RaiseCounter(ctx, redisop.Lock{Kind: redisop.KindMutex, Name: name}, first+1000))
	last := first
	for range 5 {
		h, err := l.TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		require.NoError(t, h.Release(ctx))
	}
}

// TestLateGrantReleasedWhenItLands: with one server of three paused during
// an acquire, the majority decides without it and Release does not wait
// for it; once it resumes, its grant lands, and the release sent when its
// reply arrived deletes it there, long before the grant would expire.
func TestLateGrantReleasedWhenItLands(t *testing.T) {
	procs, clients := ownServers(t, 3)
	p := newProvider(t, clients, redlock.WithTTL(time.Minute), redlock.WithMinValidity(30*time.Second))
	ctx := context.Background()
	procs[2].pause()
	h, err := p.Mutex(uniqueName(t)).TryAcquire(ctx)
	if err != nil {
		procs[2].resume()
		t.Fatal(err)
	}
	c, err := redisop.NewClient(clients[0], redlock.DefaultPrefix)
	require.NoError(t, err)
	key := c.Key(redlock.GrantOf(h).Lock)
	counter := strings.TrimSuffix(key, "mutex") + "counter"
	released := make(chan error, 1)
	go func() { released <- h.Release(ctx) }()
	select {
	case err := <-released:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Release waited for the paused server")
	}
	procs[2].resume()
	late := clients[2]
	require.Eventually(t, func() bool { return late.Exists(ctx, counter).Val() == 1 },
		20*time.Second, time.Millisecond, "the paused server's acquire did not land after it resumed")
	require.Eventually(t, func() bool { return late.Exists(ctx, key).Val() == 0 },
		20*time.Second, time.Millisecond, "the late grant was not released (its TTL is a minute)")
}

// TestWaitersTakeTurnsInTicketOrder: waiters of separate Providers line up
// on every server by the ticket each sends alike to all of them, so each
// release goes to the waiter that started waiting first, on every server,
// whatever order the servers heard them in.
func TestWaitersTakeTurnsInTicketOrder(t *testing.T) {
	clients := sharedClients(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	h, err := newProvider(t, clients).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	queue := strings.TrimSuffix(grantKeys(t, clients, h).lock, "mutex") + "mutex:q"
	queued := func(n int64) func() bool {
		return func() bool {
			for _, rdb := range clients {
				if rdb.ZCard(ctx, queue).Val() != n {
					return false
				}
			}
			return true
		}
	}
	type grant struct {
		who int
		h   core.Handle
	}
	granted := make(chan grant, 3)
	for who := range 3 {
		l := newProvider(t, clients).Mutex(name)
		go func() {
			h, err := l.Acquire(ctx)
			assert.NoError(t, err)
			granted <- grant{who, h}
		}()
		require.Eventually(t, queued(int64(who+1)), 10*time.Second, time.Millisecond, "waiter %d did not line up on every server", who)
	}
	prev := h
	for want := range 3 {
		require.NoError(t, prev.Release(ctx))
		g := <-granted
		require.Equal(t, want, g.who, "waiters must be served in the order they started waiting")
		prev = g.h
	}
	require.NoError(t, prev.Release(ctx))
}
