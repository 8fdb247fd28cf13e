package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMutexGrantReleaseLeavesNoKeys(t *testing.T) {
	prefix := redistest.Prefix()
	p := newProvider(t, WithPrefix(prefix))
	rdb := p.client.Redis()
	ctx := context.Background()
	m := p.Mutex(uniqueName(t))

	h1, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	assert.Positive(t, h1.FencingToken())
	assert.Len(t, scanKeys(t, rdb, prefix), 1, "one key per held mutex")

	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "not reentrant, even the same Locker")
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "redis", ce.Backend)

	require.NoError(t, h1.Release(ctx))
	require.NoError(t, h1.Release(ctx), "idempotent")
	assert.ErrorIs(t, context.Cause(h1.Context()), core.ErrReleased)
	assert.Empty(t, scanKeys(t, rdb, prefix))

	h2, err := m.Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, h1.Release(ctx), "a stale release leaves the new grant alone")
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, h2.Release(ctx))
	assert.Empty(t, scanKeys(t, rdb, prefix))
}

func TestSameNameDistinctPrimitives(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	name := uniqueName(t)
	var tokens []uint64
	for _, l := range []core.Locker{p.Mutex(name), p.RWMutex(name), p.RWMutex(name + "x").RLocker(), p.Semaphore(name, 1)} {
		h, err := l.TryAcquire(ctx)
		require.NoError(t, err)
		defer h.Release(ctx)
		tokens = append(tokens, h.FencingToken())
	}
	assert.IsIncreasing(t, tokens)
}

func TestKeyDeletedUnderHolderIsLost(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	for _, l := range []core.Locker{
		p.Mutex(uniqueName(t)),
		p.RWMutex(uniqueName(t)),
		p.RWMutex(uniqueName(t)).RLocker(),
		p.Semaphore(uniqueName(t), 2),
	} {
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		breakHandle(t, h)
		// Lost at the next renewal, well inside the TTL.
		waitDone(t, h.Context(), testTTL)
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
		require.NoError(t, h.Release(ctx))
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost, "Release keeps the cause")
	}
}

// breakHandle removes h's grant behind the Provider's back.
func breakHandle(t testing.TB, h core.Handle) {
	t.Helper()
	rh, ok := h.(*handle)
	require.True(t, ok, "not a redislock handle: %T", h)
	p := rh.p
	key := p.client.Key(rh.grant.Lock)
	var err error
	switch rh.grant.Lock.Kind {
	case redisop.KindRead, redisop.KindSemaphore:
		err = p.client.Redis().ZRem(context.Background(), key, rh.grant.Owner).Err()
	default:
		err = p.client.Redis().Del(context.Background(), key).Err()
	}
	require.NoError(t, err)
}

func TestWaiterWakesOnRelease(t *testing.T) {
	// The fallback backoff is a minute and the TTL longer than the test:
	// only the release announcement can hand the lock over in time.
	p := newProvider(t, WithTTL(time.Minute), WithBackoff(kit.Backoff{Min: time.Minute, Max: time.Minute}))
	ctx := context.Background()
	for _, l := range []struct {
		holder, waiter core.Locker
	}{
		{p.Mutex(t.Name() + "m"), nil},
		{p.Semaphore(t.Name()+"s", 1), nil},
		{p.RWMutex(t.Name() + "rw"), nil},
		{p.RWMutex(t.Name() + "rw2").RLocker(), p.RWMutex(t.Name() + "rw2")},
	} {
		waiter := l.waiter
		if waiter == nil {
			waiter = l.holder
		}
		h, err := l.holder.Acquire(ctx)
		require.NoError(t, err)
		got := make(chan core.Handle, 1)
		go func() {
			wh, err := waiter.Acquire(ctx)
			assert.NoError(t, err)
			got <- wh
		}()
		// Let the waiter subscribe and fail its first tries.
		require.Eventually(t, func() bool { return p.waker.Waiting() == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, h.Release(ctx))
		select {
		case wh := <-got:
			require.NotNil(t, wh)
			assert.Greater(t, wh.FencingToken(), h.FencingToken())
			require.NoError(t, wh.Release(ctx))
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not woken by the release")
		}
	}
}

func TestDeadServerFailsPromptly(t *testing.T) {
	// The driver's own dial retries (five, 100 ms apart, by default) bound
	// how long a call takes; one is enough here.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.DeadAddr(t), DialerRetries: 1, MaxRetries: -1})
	defer rdb.Close()
	p, err := New(rdb, WithTTL(testTTL))
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, l := range []core.Locker{p.Mutex("a"), p.RWMutex("a"), p.RWMutex("a").RLocker(), p.Semaphore("a", 2)} {
		_, err := l.Acquire(ctx)
		require.Error(t, err)
		assert.NotErrorIs(t, err, core.ErrNotAcquired)
		assert.NoError(t, ctx.Err(), "returned before the context ended")
		var ce *core.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "acquire", ce.Op)
		_, err = l.TryAcquire(ctx)
		assert.NotErrorIs(t, err, core.ErrNotAcquired)
	}
}

func TestWaitingWriterKeepsReadersOutUntilItGivesUp(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	rw := p.RWMutex(uniqueName(t))
	r1, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err)
	r2, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err, "readers share")

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := rw.Acquire(wctx)
		done <- err
	}()
	require.Eventually(t, func() bool {
		h, err := rw.RLocker().TryAcquire(ctx)
		if err == nil {
			_ = h.Release(ctx)
			return false
		}
		return errors.Is(err, core.ErrNotAcquired)
	}, 10*time.Second, 5*time.Millisecond, "a waiting writer keeps new readers out")

	cancel()
	require.ErrorIs(t, <-done, core.ErrNotAcquired)
	r3, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err, "the writer withdrew its marker")
	for _, h := range []core.Handle{r1, r2, r3} {
		require.NoError(t, h.Release(ctx))
	}
}

func TestCloseMarksHandlesLost(t *testing.T) {
	prefix := redistest.Prefix()
	rdb := redistest.Client(t, redistest.Addr(t))
	p, err := New(rdb, WithTTL(testTTL), WithPrefix(prefix))
	require.NoError(t, err)
	ctx := context.Background()
	h, err := p.Mutex(uniqueName(t)).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	require.NoError(t, h.Release(ctx), "release still works after Close")
	assert.Empty(t, scanKeys(t, rdb, prefix))
	_, err = p.Mutex(uniqueName(t)).TryAcquire(ctx)
	require.ErrorIs(t, err, errClosed)
	assert.Empty(t, scanKeys(t, rdb, prefix))
}

func TestMutexWaitersServedInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t)
	holder := newProvider(t)
	h, err := holder.Mutex(name).Acquire(ctx)
	require.NoError(t, err)

	queue := holder.client.Key(redisop.Lock{Kind: redisop.KindMutex, Name: name}) + ":q"
	rdb := holder.client.Redis()
	type grant struct {
		i int
		h core.Handle
	}
	const waiters = 4
	granted := make(chan grant, waiters)
	for i := range waiters {
		p := newProvider(t) // a process of its own
		go func() {
			wh, err := p.Mutex(name).Acquire(ctx)
			assert.NoError(t, err)
			granted <- grant{i, wh}
		}()
		// The next waiter arrives only once this one is queued.
		require.Eventually(t, func() bool { return rdb.ZCard(ctx, queue).Val() == int64(i+1) },
			10*time.Second, time.Millisecond)
	}
	prev := h
	for want := range waiters {
		require.NoError(t, prev.Release(ctx))
		select {
		case g := <-granted:
			require.Equal(t, want, g.i, "served in arrival order")
			require.NotNil(t, g.h)
			assert.Greater(t, g.h.FencingToken(), prev.FencingToken())
			prev = g.h
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d not served", want)
		}
	}
	require.NoError(t, prev.Release(ctx))
}

// The calls of a prepared mutex (Provider's) build their own EVALSHA: after
// a SCRIPT FLUSH they fall back to EVAL as redis.Script.Run does.
func TestPreparedMutexAfterScriptFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redistest.Client(t, srv.Addr())
	// A span of an hour: the run must not end before the release on a loaded
	// machine (the default 20 ms can pass between the grant and the release).
	p, err := New(rdb, WithTTL(testTTL), WithLocalHandoff(kit.DefaultHandoffMax, time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := p.Mutex("a")
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	h1, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	// A waiter in line: the release draws its token (mutex_spare.lua).
	w, _ := p.hand.Enqueue(line(p, "a"), "")
	require.NoError(t, h1.Release(ctx))
	h2, ok := p.hand.Leave(line(p, "a"), w)
	require.True(t, ok)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, h2.Release(ctx))
	assert.Zero(t, rdb.Exists(ctx, line(p, "a")).Val(), "the release did not run")
}
