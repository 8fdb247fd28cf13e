package natslock

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

// slowPoll makes a waiter's fallback retry a minute, in a bucket whose TTL
// is a minute: only its line can hand it the lock in time.
var slowPoll = kit.Backoff{Min: time.Minute, Max: time.Minute}

const lineBucket, lineTTL = "distlock_test_long", time.Minute

// inLine waits until the hold of h's grant has n waiters.
func inLine(t *testing.T, p *Provider, h core.Handle, n int) {
	t.Helper()
	owner := h.(*handle).lease.e.owner
	require.Eventually(t, func() bool {
		p.line.mu.Lock()
		defer p.line.mu.Unlock()
		hd, ok := p.line.holds[owner]
		return ok && len(hd.waiters) == n
	}, 10*time.Second, time.Millisecond, "the waiters never joined the holder's line")
}

// acquireAsync runs p.Mutex(name).Acquire(ctx) and returns its outcome's
// channel.
func acquireAsync(ctx context.Context, p *Provider, name string) <-chan acquired {
	c := make(chan acquired, 1)
	go func() {
		h, err := p.Mutex(name).Acquire(ctx)
		c <- acquired{h, err}
	}()
	return c
}

type acquired struct {
	h   core.Handle
	err error
}

func await(t *testing.T, c <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("the Acquire did not return")
	}
	return acquired{}
}

// A release hands the mutex to the waiters of other Providers in the order
// they joined, with one write each: the key is never deleted on the way,
// each waiter's token is the revision of the write that names it, and no
// waiter watches the key.
func TestLineHandsOverInOrder(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	holder := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL))
	w1 := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL), WithBackoff(slowPoll))
	w2 := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL), WithBackoff(slowPoll))
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	c1 := acquireAsync(ctx, w1, name)
	inLine(t, holder, h, 1)
	c2 := acquireAsync(ctx, w2, name)
	inLine(t, holder, h, 2)

	released := time.Now()
	require.NoError(t, h.Release(ctx))
	a1 := await(t, c1)
	require.NoError(t, a1.err)
	// The heir's trust window starts at the join the release acted on,
	// before the release.
	ls, ok := a1.h.(core.LeaseReporter).Lease()
	require.True(t, ok)
	assert.False(t, ls.Renewed.After(released), "trust starts at %v, after the release at %v", ls.Renewed, released)
	assert.Equal(t, ls.Renewed.Add(lineTTL-lineTTL/10), ls.Deadline)
	msg, err := holder.last(ctx, mutexKey(name))
	require.NoError(t, err)
	require.False(t, isMarker(msg))
	assert.Equal(t, msg.Sequence, a1.h.FencingToken(), "the token is the revision of the handover's write")
	assert.Greater(t, a1.h.FencingToken(), h.FencingToken())
	assert.NoError(t, a1.h.Context().Err())

	select {
	case a := <-c2:
		t.Fatalf("the second waiter got the lock before the first released it: %v", a.err)
	default:
	}
	require.NoError(t, a1.h.Release(ctx))
	a2 := await(t, c2)
	require.NoError(t, a2.err)
	assert.Greater(t, a2.h.FencingToken(), a1.h.FencingToken())
	require.NoError(t, a2.h.Release(ctx))

	for _, p := range []*Provider{w1, w2} {
		p.wmu.Lock()
		assert.Empty(t, p.watches, "a mutex waiter started a KV watcher")
		p.wmu.Unlock()
	}
	free, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the last release left the lock held")
	require.NoError(t, free.Release(ctx))
}

// A waiter that gives up leaves the holder's line before its Acquire
// returns, so the release that follows frees the lock.
func TestLineWaiterGivesUp(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	holder := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL))
	waiter := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL), WithBackoff(slowPoll))
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	c := acquireAsync(wctx, waiter, name)
	inLine(t, holder, h, 1)
	cancel()
	a := await(t, c)
	require.ErrorIs(t, a.err, core.ErrNotAcquired)
	inLine(t, holder, h, 0)

	require.NoError(t, h.Release(ctx))
	free, err := waiter.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the release handed the lock to a waiter that had left")
	require.NoError(t, free.Release(ctx))
}

// A holder written by a Provider without a line (an older release: no
// inbox in its value) is waited for by polling.
func TestLineHolderWithoutInbox(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	p := newProvider(t, WithBackoff(kit.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}))
	name := lockName(t)
	key := mutexKey(name)
	_, err := p.kv.Create(ctx, key, value{ID: "old", Owner: newOwner()}.encode())
	require.NoError(t, err)
	c := acquireAsync(ctx, p, name)
	select {
	case a := <-c:
		t.Fatalf("acquired a held lock: %v", a.err)
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, p.kv.Delete(ctx, key))
	a := await(t, c)
	require.NoError(t, a.err)
	require.NoError(t, a.h.Release(ctx))
}

// A holder whose Provider is gone (its process exited) keeps the key
// until it expires. The server answers the waiter's join to it with a
// no-responders status; the waiter then waits for the expiry, polling,
// instead of joining and reading the key again at once, round after round.
func TestLineHolderGone(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	holderJS := connect(t, locktest.RequireEnv(t, "DISTLOCK_NATS_URL"))
	holder, waiter := newProviderOn(t, holderJS), newProvider(t)
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, holder.Close())
	holderJS.Conn().Close()

	// Every write, read and join goes out on the waiter's connection.
	sent := func() uint64 { return waiter.js.Conn().Stats().OutMsgs }
	before := sent()
	start := time.Now()
	wh, err := waiter.Mutex(name).Acquire(ctx)
	require.NoError(t, err)
	waited := time.Since(start)
	msgs := sent() - before
	assert.Greater(t, waited, testTTL/2, "acquired before the holder's key expired")
	assert.Less(t, waited, testTTL+2*time.Second)
	assert.Greater(t, wh.FencingToken(), h.FencingToken())
	require.NoError(t, wh.Release(ctx))
	assert.Less(t, msgs, uint64(100), "the waiter sent %d messages in %v", msgs, waited)
}

// A waiter whose process exits while it waits in the line: the release
// that comes to it finds no one to answer, hands the lock on in its stead
// (here: frees it), and the lock does not wait for the grant to expire.
func TestLineHeirGone(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	url := locktest.RequireEnv(t, "DISTLOCK_NATS_URL")
	holder := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL))
	heirJS := connect(t, url)
	heir := newProviderOn(t, heirJS, WithBucket(lineBucket), WithTTL(lineTTL))
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	c := acquireAsync(ctx, heir, name)
	inLine(t, holder, h, 1)
	heirJS.Conn().Close()
	a := await(t, c)
	require.Error(t, a.err, "the waiter got the lock over a closed connection")

	require.NoError(t, h.Release(ctx))
	free, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the lock was left to the gone waiter")
	assert.Greater(t, free.FencingToken(), h.FencingToken()+1, "the key was not handed to the waiter first")
	require.NoError(t, free.Release(ctx))
}

// A grant is taken only when its announcement and the acknowledgement of
// its write belong together: an acknowledgement left from another
// handover (its announcement lost) is not paired with a later one, and
// two grants in flight at once do not take each other's halves.
func TestLineGrantHalvesPairByNonce(t *testing.T) {
	p := newProvider(t)
	ln := &p.line
	key, owner := mutexKey(lockName(t)), newOwner()
	ln.expect(key, owner)
	w := lineWaiter{Owner: owner, ID: "w", Inbox: ln.inbox, Seq: 1}
	ln.assemble(owner, nil, "", &pubAck{Seq: 5}, "stale")
	ln.assemble(owner, &lineMsg{Kind: msgGrant, Key: key, W: w, Expect: 9, Nonce: "fresh"}, "", nil, "")
	assert.Nil(t, ln.take(owner), "a stale acknowledgement completed a later announcement")
	ln.assemble(owner, nil, "", &pubAck{Seq: 10}, "fresh")
	g := ln.take(owner)
	require.NotNil(t, g)
	assert.Equal(t, uint64(10), g.Rev)

	// Two grants in flight at once, their halves interleaved: each pairs
	// with its own, and the stale one (its write failed) grants nothing.
	ln.assemble(owner, nil, "", &pubAck{Seq: 20}, "valid")
	ln.assemble(owner, &lineMsg{Kind: msgGrant, Key: key, W: w, Expect: 12, Nonce: "old"}, "", nil, "")
	ln.assemble(owner, nil, "", &pubAck{Error: &apiError{Code: 400, ErrCode: 10071}}, "old")
	assert.Nil(t, ln.take(owner), "a failed write granted the key")
	ln.assemble(owner, &lineMsg{Kind: msgGrant, Key: key, W: w, Expect: 19, Nonce: "valid"}, "", nil, "")
	g = ln.take(owner)
	require.NotNil(t, g, "the valid grant was stranded")
	assert.Equal(t, uint64(20), g.Rev)
	g2, _ := ln.quit(owner)
	assert.Nil(t, g2)
}

// A join to a holder whose release could not delete the key (its context
// was done) is answered "none": the waiter waits for the key to expire
// instead of reading it and joining again at once.
func TestLineHolderReleaseFailed(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	holder, waiter := newProvider(t), newProvider(t)
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, h.Release(done), "a release with a done context deleted the key")

	sent := func() uint64 { return waiter.js.Conn().Stats().OutMsgs }
	before := sent()
	start := time.Now()
	wh, err := waiter.Mutex(name).Acquire(ctx)
	require.NoError(t, err)
	waited, msgs := time.Since(start), sent()-before
	assert.Greater(t, waited, testTTL/2, "acquired before the holder's key expired")
	require.NoError(t, wh.Release(ctx))
	assert.Less(t, msgs, uint64(100), "the waiter sent %d messages in %v", msgs, waited)
}

// A waiter that its line sent to the key (told the key is free, or that
// the holder it joined holds nothing) waits in no line until it joins one
// again. When its try then joins no one (here: the key is held by an
// older natslock, without a line), its next attempt asks the server
// instead of waiting for a line that will not hand it the key, which left
// it to its fallback retry (a minute here).
func TestLineWaiterSentToTheKeyIsInNoLine(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	p := newProvider(t, WithBucket(lineBucket), WithTTL(lineTTL), WithBackoff(slowPoll))
	name := lockName(t)
	key := mutexKey(name)
	w := &mutexWait{m: &mutex{p: p, name: name, key: key}, owner: newOwner()}
	p.line.expect(key, w.owner)
	// It joined a holder just now, whose hold then ended: "free".
	w.sent, w.to, w.queued = []time.Time{time.Now()}, &value{ID: "a", Owner: newOwner()}, true
	p.line.wake(w.owner, 0, "")
	rev, err := p.kv.Create(ctx, key, value{ID: "old", Owner: newOwner()}.encode())
	require.NoError(t, err)
	_, retryIn, err := w.attempt(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.LessOrEqual(t, retryIn, kit.QueuedPollMin, "a holder without a line is polled")

	require.NoError(t, p.kv.Delete(ctx, key, jetstream.LastRevision(rev)))
	h, _, err := w.attempt(ctx)
	require.NoError(t, err, "the waiter waited in a line it had left")
	w.leave(h)
	require.NoError(t, h.Release(ctx))
}
