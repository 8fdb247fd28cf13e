package redislock

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/redislock/redisop"
)

// slowHandoffs lets a run of local handoffs last as long as a test takes
// (with the race detector on a busy machine, more than the default 20 ms).
func slowHandoffs() Option { return WithLocalHandoff(kit.DefaultHandoffMax, time.Hour) }

// line is the key of mutex name's line of waiters in p.
func line(p *Provider, name string) string {
	return p.client.Key(redisop.Lock{Kind: redisop.KindMutex, Name: name})
}

// waiters returns how many Acquires of p stand in mutex name's line.
func waiters(p *Provider, name string) int { return p.hand.Len(line(p, name)) }

// waitInLine starts an Acquire of mutex name on p and waits until it stands
// in the line and listens for its wake-up: past its first look for a
// holder, during which it is not claimable.
func waitInLine(t *testing.T, ctx context.Context, p *Provider, name string) (<-chan core.Handle, <-chan error) {
	t.Helper()
	n := waiters(p, name)
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	require.Eventually(t, func() bool {
		return waiters(p, name) == n+1 && p.waker.Waiting() >= n+1
	}, 5*time.Second, time.Millisecond)
	return got, errc
}

// heldMutex returns a Provider with slow handoff runs and opts, a test
// context, and a mutex name that the returned handle holds.
func heldMutex(t *testing.T, opts ...Option) (*Provider, context.Context, string, core.Handle) {
	t.Helper()
	p := newProvider(t, append([]Option{slowHandoffs()}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	name := uniqueName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	return p, ctx, name, h
}

// ownerOf reads the owner value in mutex name's key ("" when free).
func ownerOf(t *testing.T, p *Provider, name string) string {
	t.Helper()
	v, err := p.client.Redis().Get(context.Background(), line(p, name)).Result()
	if err != nil {
		return ""
	}
	owner, _, _ := strings.Cut(v, ":")
	return owner
}

func run(h core.Handle) int { return h.(*handle).lease.run.Len() }

// A release hands the mutex to a waiter of the same Provider without
// releasing the key: the owner value stays, the waiter's token is larger,
// Holder names it once its background write lands, and the old handle's
// second release touches nothing.
func TestLocalHandoff(t *testing.T) {
	p := newProvider(t, WithIdentity("local"), slowHandoffs())
	other := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	m := p.Mutex(name)
	h1, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	owner := ownerOf(t, p, name)

	got, errc := waitInLine(t, ctx, p, name)
	who, held, err := other.Mutex(name).(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "local", Token: h1.FencingToken()}, who)

	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 1, run(h2), "granted by a local handoff")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	assert.NoError(t, h2.Context().Err())
	assert.Equal(t, owner, ownerOf(t, p, name), "the key was released and taken again")
	who, held, err = m.(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "local", Token: h2.FencingToken()}, who, "the holder's own Provider knows its token at once")
	require.Eventually(t, func() bool {
		who, held, err := other.Mutex(name).(core.Inspector).Holder(ctx)
		return err == nil && held && who == core.Holder{ID: "local", Token: h2.FencingToken()}
	}, 5*time.Second, 10*time.Millisecond, "Holder never named the new token")

	require.NoError(t, h1.Release(ctx), "a second release is harmless")
	_, err = other.Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "the stale release freed the new holder's grant")

	require.NoError(t, h2.Release(ctx))
	assert.Empty(t, ownerOf(t, p, name), "the last release leaves the key")
	h3, err := other.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h3.FencingToken(), h2.FencingToken())
	require.NoError(t, h3.Release(ctx))
	assert.Empty(t, scanKeys(t, p.client.Redis(), keyBase(p, name)), "keys left behind")
}

// A release draws the waiter's token and records it in the key's value.
func TestLocalHandoffRecordsToken(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	w, first := p.hand.Enqueue(line(p, name), "")
	require.True(t, first)
	require.NoError(t, h1.Release(ctx))
	h2, ok := p.hand.Leave(line(p, name), w)
	require.True(t, ok, "the release handed the lock to the waiter")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	who, held, err := p.Mutex(name).(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, h2.FencingToken(), who.Token, "the value names the token drawn at the release")
	require.NoError(t, h2.Release(ctx))
}

// After WithLocalHandoff grants in a row the release runs the release
// script, so waiters in other processes get their chance, and a new run
// starts.
func TestLocalHandoffRunIsBounded(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(2, time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	var runs []int
	owners := map[string]bool{ownerOf(t, p, name): true}
	for range 5 {
		got, errc := waitInLine(t, ctx, p, name)
		tok := h.FencingToken()
		require.NoError(t, h.Release(ctx))
		h = locktest.Receive(t, got, errc)
		require.Greater(t, h.FencingToken(), tok)
		runs = append(runs, run(h))
		owners[ownerOf(t, p, name)] = true
	}
	require.NoError(t, h.Release(ctx))
	assert.Equal(t, []int{1, 2, 0, 1, 2}, runs)
	assert.Len(t, owners, 2, "one release script ends each run")
}

// A waiter of another Provider, queued on the server, gets the lock when
// the run of local handoffs ends, ahead of the local waiters still in line.
func TestLocalHandoffYieldsToOtherProcesses(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(2, time.Hour))
	other := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	rgot, rerrc := locktest.AcquireAsync(ctx, other.Mutex(name))
	require.Eventually(t, func() bool {
		v, _ := p.client.Redis().Get(ctx, line(p, name)).Result()
		return strings.HasSuffix(v, "+")
	}, 5*time.Second, time.Millisecond, "the remote waiter never queued")

	type waiter struct {
		got  <-chan core.Handle
		errc <-chan error
	}
	var local []waiter
	for range 3 {
		got, errc := waitInLine(t, ctx, p, name)
		local = append(local, waiter{got, errc})
	}
	for i := range 2 {
		require.NoError(t, h.Release(ctx))
		h = locktest.Receive(t, local[i].got, local[i].errc)
		require.Equal(t, i+1, run(h))
	}
	require.NoError(t, h.Release(ctx))
	rh := locktest.Receive(t, rgot, rerrc)
	assert.Greater(t, rh.FencingToken(), h.FencingToken())
	select {
	case <-local[2].got:
		t.Fatal("the local waiter got the lock while the remote one held it")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, rh.Release(ctx))
	h = locktest.Receive(t, local[2].got, local[2].errc)
	assert.Greater(t, h.FencingToken(), rh.FencingToken())
	assert.Equal(t, 0, run(h))
	require.NoError(t, h.Release(ctx))
}

func TestLocalHandoffOff(t *testing.T) {
	p := newProvider(t, WithLocalHandoff(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	owner := ownerOf(t, p, name)
	got, errc := waitInLine(t, ctx, p, name)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	assert.Equal(t, 0, run(h2))
	assert.NotEqual(t, owner, ownerOf(t, p, name), "handed on with handoffs off")
	assert.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NoError(t, h2.Release(ctx))
}

// A grant handed to a waiter that has left is released again, so the lock
// is never left held by nobody.
func TestHandoffToWaiterThatLeft(t *testing.T) {
	p := newProvider(t, slowHandoffs())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t)
	key := line(p, name)

	// A waiter handed the lock that leaves without taking it: the grant is
	// the caller's to release (kit's tests cover a waiter that leaves while
	// a release hands it the lock).
	h1, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	w, _ := p.hand.Enqueue(key, "")
	require.NoError(t, h1.Release(ctx))
	g, ok := p.hand.Leave(key, w)
	require.True(t, ok)
	require.NoError(t, g.Release(ctx))
	h2, err := newProvider(t).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the lock was left held")
	require.NoError(t, h2.Release(ctx))
}

// A holder whose key was deleted by hand hands nothing on: its local waiter
// takes the lock afresh once the keeper has found the holder lost.
func TestLostHolderHandsNothingOn(t *testing.T) {
	p, ctx, name, h1 := heldMutex(t)
	got, errc := waitInLine(t, ctx, p, name)

	require.NoError(t, p.client.Redis().Del(ctx, line(p, name)).Err())
	h2 := locktest.Receive(t, got, errc)
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrLockLost,
		"the waiter took the lock while the local holder still believed it held it")
	assert.Equal(t, 0, run(h2))
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
	got, errc := waitInLine(t, ctx, p, name)
	require.NoError(t, h1.Release(ctx))
	h2 := locktest.Receive(t, got, errc)
	require.Equal(t, 1, run(h2))

	locktest.RequireKept(t, h2, testTTL, newProvider(t).Mutex(name))
	require.NoError(t, h2.Release(ctx))
}

// TryAcquire, which skips the local line, racing waiters of the same
// Provider: never two holders, and once everyone stops the lock is free at
// once (no grant was left to a waiter that had stopped waiting).
func TestTryAcquireRacingLocalWaiters(t *testing.T) {
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := uniqueName(t)
	var (
		mu     sync.Mutex
		inside int
		grants int
		wg     sync.WaitGroup
	)
	hold := func(h core.Handle) {
		mu.Lock()
		inside++
		assert.Equal(t, 1, inside, "two holders")
		grants++
		mu.Unlock()
		time.Sleep(time.Duration(rand.N(300)) * time.Microsecond)
		mu.Lock()
		inside--
		mu.Unlock()
		assert.NoError(t, h.Release(ctx))
	}
	stop := time.Now().Add(500 * time.Millisecond)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if i < 2 {
					if h, err := p.Mutex(name).TryAcquire(ctx); err == nil {
						hold(h)
					}
					continue
				}
				wctx, wcancel := context.WithTimeout(ctx, time.Duration(1+rand.N(5))*time.Millisecond)
				h, err := p.Mutex(name).Acquire(wctx)
				wcancel()
				if err == nil {
					hold(h)
				} else {
					assert.ErrorIs(t, err, core.ErrNotAcquired)
				}
			}
		}()
	}
	wg.Wait()
	assert.Positive(t, grants)
	h, err := newProvider(t).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the lock was left held")
	require.NoError(t, h.Release(ctx))
}
