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
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

// slowHandoffs lets a run of local handoffs last as long as a test takes
// (with the race detector on a busy machine, more than the default 20 ms).
func slowHandoffs(max int) Option { return WithLocalHandoff(max, time.Hour) }

// queued reports whether an Acquire of p stands in key's line.
func queued(p *Provider, key string) bool {
	_, ok := p.handoff.First(key)
	return ok
}

// runOf is how many local handoffs in a row led to h.
func runOf(h core.Handle) int { return h.(*handle).lease.run.Len() }

// deletes counts the delete markers written on key from now on. Its func
// waits until the watcher has relayed the key's latest revision (the
// watcher delivers in order, so every marker before it is counted).
func deletes(t *testing.T, p *Provider, key string) func() int {
	t.Helper()
	w, err := p.kv.Watch(ctxT(t, time.Minute), key, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	require.NoError(t, err)
	t.Cleanup(func() { stopWatcher(w) })
	var mu sync.Mutex
	n, seen := 0, uint64(0)
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			mu.Lock()
			seen = e.Revision()
			if e.Operation() != jetstream.KeyValuePut {
				n++
			}
			mu.Unlock()
		}
	}()
	return func() int {
		msg, err := p.last(ctxT(t, 10*time.Second), key)
		require.NoError(t, err)
		require.NotNil(t, msg)
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen >= msg.Sequence
		}, 10*time.Second, time.Millisecond, "the watcher never relayed revision %d", msg.Sequence)
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A release hands the mutex to a waiter of the same Provider without
// deleting the key: the waiter's token is larger, Holder names it at once,
// and the old handle's second release touches nothing.
func TestLocalHandoff(t *testing.T) {
	p := newProvider(t, WithIdentity("local"), slowHandoffs(kit.DefaultHandoffMax))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	m := p.Mutex(name)
	h1, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	key := h1.(*handle).key
	count := deletes(t, p, key)

	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	require.Eventually(t, func() bool { return queued(p, key) }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 1, runOf(h2), "granted by a local handoff")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	assert.NoError(t, h2.Context().Err())

	who, held, err := m.(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, core.Holder{ID: "local", Token: h2.FencingToken()}, who)
	// Another process sees the new token too: the handoff's write names it.
	id, tok, err := newProvider(t).Holder(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, "local", id)
	assert.Equal(t, h2.FencingToken(), tok)

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
	p := newProvider(t, slowHandoffs(2))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	key := h.(*handle).key
	count := deletes(t, p, key)

	var runs []int
	for range 5 {
		got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
		require.Eventually(t, func() bool { return queued(p, key) }, 5*time.Second, time.Millisecond)
		tok := h.FencingToken()
		require.NoError(t, h.Release(ctx))
		h = locktest.Receive(t, got, errc)
		require.Greater(t, h.FencingToken(), tok)
		runs = append(runs, runOf(h))
	}
	require.NoError(t, h.Release(ctx))
	assert.Equal(t, []int{1, 2, 0, 1, 2}, runs)
	assert.Equal(t, 2, count(), "one delete ends each run")
}

func TestLocalHandoffOff(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(0, 0))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	count := deletes(t, p, h1.(*handle).key)
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	// The waiter subscribes to the key's releases once its try failed.
	require.Eventually(t, func() bool { return p.notify.Len() > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 0, runOf(h2), "no local handoff run")
	// The release went through the server: it deleted the key, which the
	// waiter then took, or, when the waiter had joined the holder's line
	// by then, wrote the key for it (line.go); either way a new revision.
	assert.LessOrEqual(t, count(), 1)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, h2.Release(ctx))
}

// heldMutex returns a Provider with slow handoff runs, a test context, and a
// mutex name that the returned handle holds.
func heldMutex(t *testing.T) (*Provider, context.Context, string, core.Handle) {
	t.Helper()
	p := newProvider(t, slowHandoffs(kit.DefaultHandoffMax))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	return p, ctx, name, h1
}

// A grant handed to a waiter that left without taking it is the caller's
// to release, so the lock is never left held by nobody (kit's tests and the
// conformance case WaitersGiveUpAroundRelease cover a waiter that leaves
// while a release hands it the lock).
func TestHandoffToWaiterThatLeft(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	key := h1.(*handle).key

	// A waiter in line that never runs: its grant is delivered, then it
	// leaves without taking it, as a waiter whose context ends does.
	w, first := p.handoff.Enqueue(key, key)
	require.True(t, first)
	require.NoError(t, h1.Release(ctx))
	g, _ := p.handoff.Leave(key, w)
	require.NotNil(t, g, "the release handed the lock to the waiter")
	require.NoError(t, g.Release(ctx))

	assert.False(t, queued(p, key))

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
	require.Eventually(t, func() bool { return queued(p, key) }, 5*time.Second, time.Millisecond)

	require.NoError(t, p.kv.Delete(ctx, key))
	h2 := locktest.Receive(t, got, errc)
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrLockLost,
		"the waiter took the lock while the local holder still believed it held it")
	assert.Equal(t, 0, runOf(h2))
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
	require.Eventually(t, func() bool { return queued(p, h1.(*handle).key) }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	require.Equal(t, 1, runOf(h2))

	locktest.RequireKept(t, h2, testTTL, newProvider(t).Mutex(name))
	require.NoError(t, h2.Release(ctx))
}

// A semaphore slot is handed on like a mutex.
func TestSemaphoreLocalHandoff(t *testing.T) {
	p := newProvider(t, slowHandoffs(kit.DefaultHandoffMax))
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	s := p.Semaphore(name, 1)
	h1, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	got, errc := locktest.AcquireAsync(ctx, p.Semaphore(name, 1))
	require.Eventually(t, func() bool { return queued(p, semaphoreKeys(name)+".*") }, 5*time.Second, time.Millisecond)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 1, runOf(h2))
	assert.Equal(t, h1.(*handle).key, h2.(*handle).key)
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	_, err = newProvider(t).Semaphore(name, 1).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, h2.Release(ctx))
}
