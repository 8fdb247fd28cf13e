package natslock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// slowHandoffs lets a run of local handoffs last as long as a test takes
// (with the race detector on a busy machine, more than the default 20 ms).
func slowHandoffs() Option { return func(c *config) { c.handoffSpan = time.Hour } }

// waiters returns how many Acquires of p stand in key's line.
func waiters(p *Provider, key string) int {
	return p.handoff.Len(key)
}

// deletes counts the delete markers written on key from now on.
func deletes(t *testing.T, p *Provider, key string) func() int {
	t.Helper()
	w, err := p.kv.Watch(ctxT(t, time.Minute), key, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	require.NoError(t, err)
	t.Cleanup(func() { stopWatcher(w) })
	var mu sync.Mutex
	n := 0
	go func() {
		for e := range w.Updates() {
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	return func() int {
		// A marker is relayed within a round trip; give it a moment.
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A release hands the mutex to a waiter of the same Provider without
// deleting the key: the waiter's token is larger, Holder names it at once,
// and the old handle's second release touches nothing.
func TestLocalHandoff(t *testing.T) {
	p := newProvider(t, WithIdentity("local"), slowHandoffs())
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	m := p.Mutex(name)
	h1, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	key := h1.(*handle).key
	count := deletes(t, p, key)

	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	require.Eventually(t, func() bool { return waiters(p, key) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 1, h2.(*handle).lease.run, "granted by a local handoff")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	assert.NoError(t, h2.Context().Err())

	who, held, err := m.(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, core.Holder{ID: "local", Token: h2.FencingToken()}, who)
	// Another process sees the new token too, once the background write
	// that names it has landed.
	remote := newProvider(t)
	require.Eventually(t, func() bool {
		id, tok, err := remote.Holder(ctx, name)
		return err == nil && id == "local" && tok == h2.FencingToken()
	}, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, h1.Release(ctx), "a second release is harmless")
	_, err = newProvider(t).Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "the stale release freed the new holder's grant")

	require.NoError(t, h2.Release(ctx))
	assert.Equal(t, 1, count(), "only the last release deletes the key")
	h3, err := newProvider(t).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h3.FencingToken(), h2.FencingToken())
	require.NoError(t, h3.Release(ctx))
}

// After WithLocalHandoff grants in a row the release deletes the key, so
// waiters in other processes get their chance, and a new run starts.
func TestLocalHandoffRunIsBounded(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(2), slowHandoffs())
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	key := h.(*handle).key
	count := deletes(t, p, key)

	var runs []int
	for range 5 {
		got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
		require.Eventually(t, func() bool { return waiters(p, key) == 1 }, 5*time.Second, time.Millisecond)
		tok := h.FencingToken()
		require.NoError(t, h.Release(ctx))
		h = locktest.Receive(t, got, errc)
		require.Greater(t, h.FencingToken(), tok)
		runs = append(runs, h.(*handle).lease.run)
	}
	require.NoError(t, h.Release(ctx))
	assert.Equal(t, []int{1, 2, 0, 1, 2}, runs)
	assert.Equal(t, 2, count(), "one delete ends each run")
}

func TestLocalHandoffOff(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(0))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	count := deletes(t, p, h1.(*handle).key)
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	time.Sleep(50 * time.Millisecond) // let the waiter start waiting
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 0, h2.(*handle).lease.run)
	assert.Equal(t, 1, count())
	require.NoError(t, h2.Release(ctx))
}

// heldMutex returns a Provider with slow handoff runs, a test context, and a
// mutex name that the returned handle holds.
func heldMutex(t *testing.T) (*Provider, context.Context, string, core.Handle) {
	t.Helper()
	p := newProvider(t, slowHandoffs())
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	return p, ctx, name, h1
}

// A grant handed to a waiter that has left is released again, so the lock
// is never left held by nobody.
func TestHandoffToWaiterThatLeft(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	key := h1.(*handle).key

	// A waiter in line that never runs: its grant is delivered, then it
	// leaves without taking it, as a waiter whose context ends does.
	w, first := p.handoff.Enqueue(key, "")
	require.True(t, first)
	require.NoError(t, h1.Release(ctx))
	g, _, _ := p.handoff.Leave(key, w)
	require.NotNil(t, g, "the release handed the lock to the waiter")
	require.NoError(t, g.Release(ctx))

	// A waiter that leaves while a release is handing it the lock: the
	// delivery fails, and the release then releases the grant itself
	// (the conformance case WaitersGiveUpAroundRelease runs that race for real).
	w, _ = p.handoff.Enqueue(key, "")
	require.Same(t, w, p.handoff.Claim(key))
	assert.Nil(t, p.handoff.Claim(key), "claimed twice")
	p.handoff.Unclaim(w)
	require.Same(t, w, p.handoff.Claim(key))
	g, _, _ = p.handoff.Leave(key, w)
	require.Nil(t, g)
	assert.False(t, p.handoff.Deliver(w, &handle{}), "delivered to a waiter that left")
	assert.Zero(t, waiters(p, key))

	h2, err := newProvider(t).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the lock was left held")
	require.NoError(t, h2.Release(ctx))
}

// A holder whose key was deleted by hand hands nothing on: its local waiter
// takes the lock afresh once the keeper has found the holder lost.
func TestLostHolderHandsNothingOn(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	key := h1.(*handle).key
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	require.Eventually(t, func() bool { return waiters(p, key) == 1 }, 5*time.Second, time.Millisecond)

	require.NoError(t, p.kv.Delete(ctx, key))
	h2 := locktest.Receive(t, got, errc)
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrLockLost,
		"the waiter took the lock while the local holder still believed it held it")
	assert.Equal(t, 0, h2.(*handle).lease.run)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, h1.Release(ctx))
	who, held, err := p.Mutex(name).(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	require.True(t, held, "the lost handle's release freed the new grant")
	assert.Equal(t, h2.FencingToken(), who.Token)
	require.NoError(t, h2.Release(ctx))
}

// Handed-on grants are renewed like any other, past the TTL.
func TestHandedOnLeaseIsRenewed(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	require.Eventually(t, func() bool { return waiters(p, h1.(*handle).key) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	require.Equal(t, 1, h2.(*handle).lease.run)

	locktest.RequireKept(t, h2, testTTL, newProvider(t).Mutex(name))
	require.NoError(t, h2.Release(ctx))
}

// A semaphore slot is handed on like a mutex.
func TestSemaphoreLocalHandoff(t *testing.T) {
	p := newProvider(t, slowHandoffs())
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	s := p.Semaphore(name, 1)
	h1, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	got, errc := locktest.AcquireAsync(ctx, p.Semaphore(name, 1))
	require.Eventually(t, func() bool { return waiters(p, semaphoreKeys(name)+".*") == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 1, h2.(*handle).lease.run)
	assert.Equal(t, h1.(*handle).key, h2.(*handle).key)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	_, err = newProvider(t).Semaphore(name, 1).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, h2.Release(ctx))
}
