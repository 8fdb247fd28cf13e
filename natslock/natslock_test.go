package natslock

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

func TestNewRejectsBadOptions(t *testing.T) {
	js := connect(t, locktest.RequireEnv(t, "DISTLOCK_NATS_URL"))
	newProviderOn(t, js) // the test bucket exists, with its TTL
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"short TTL", []Option{WithTTL(10 * time.Millisecond)}},
		{"bad bucket", []Option{WithBucket("a.b")}},
		{"empty bucket", []Option{WithBucket("")}},
		{"bad members bucket", []Option{WithMembersBucket("a b")}},
		{"empty identity", []Option{WithIdentity("")}},
		{"short member TTL", []Option{WithMemberMaxTTL(time.Millisecond)}},
		{"negative renew interval", []Option{WithRenewInterval(-time.Second)}},
		{"renew interval beyond the trust window", []Option{WithTTL(time.Second), WithRenewInterval(900 * time.Millisecond)}},
		{"negative local handoff run", []Option{WithLocalHandoff(-1, time.Second)}},
		{"local handoff without a span", []Option{WithLocalHandoff(8, 0)}},
		{"TTL differs from the bucket's", []Option{WithBucket(testBucket), WithTTL(testTTL + time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(js, tc.opts...)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.Nil(t, p)
		})
	}
	t.Run("nil JetStream", func(t *testing.T) {
		_, err := New(nil)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	})
}

func TestBadArgumentsFailAtAcquire(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 10*time.Second)
	for _, tc := range []struct {
		name string
		l    core.Locker
		want error
	}{
		{"mutex empty name", p.Mutex(""), core.ErrInvalidName},
		{"mutex bad UTF-8", p.Mutex("a\xffb"), core.ErrInvalidName},
		{"semaphore empty name", p.Semaphore("", 2), core.ErrInvalidName},
		{"semaphore max 0", p.Semaphore(lockName(t), 0), core.ErrInvalidArgument},
		{"semaphore max too large", p.Semaphore(lockName(t), 1<<30), core.ErrInvalidArgument},
		{"rwmutex empty name", p.RWMutex(""), core.ErrInvalidName},
		{"rwmutex bad UTF-8 read side", p.RWMutex("\xff").RLocker(), core.ErrInvalidName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.l.TryAcquire(ctx)
			require.ErrorIs(t, err, tc.want)
			_, err = tc.l.Acquire(ctx)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestHolder(t *testing.T) {
	p := newProvider(t, WithIdentity("worker-7"))
	ctx := ctxT(t, 10*time.Second)
	name := lockName(t)

	id, tok, err := p.Holder(ctx, name)
	require.NoError(t, err)
	assert.Empty(t, id)
	assert.Zero(t, tok)

	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	id, tok, err = p.Holder(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, "worker-7", id)
	assert.Equal(t, h.FencingToken(), tok)

	in, ok := newProvider(t).Mutex(name).(core.Inspector)
	require.True(t, ok, "a Mutex implements core.Inspector")
	holder, held, err := in.Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, core.Holder{ID: "worker-7", Token: h.FencingToken()}, holder)

	require.NoError(t, h.Release(ctx))
	id, _, err = p.Holder(ctx, name)
	require.NoError(t, err)
	assert.Empty(t, id)
	_, held, err = in.Holder(ctx)
	require.NoError(t, err)
	assert.False(t, held)

	_, _, err = p.Holder(ctx, "")
	require.ErrorIs(t, err, core.ErrInvalidName)
}

func TestBusyErrorNamesHolder(t *testing.T) {
	p1 := newProvider(t, WithIdentity("holder-a"))
	p2 := newProvider(t)
	ctx := ctxT(t, 10*time.Second)
	name := lockName(t)
	h, err := p1.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	defer h.Release(ctx)

	_, err = p2.Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.Contains(t, err.Error(), "holder-a")
}

// The keeper renews every TTL/3, so a lease outlives its TTL for as long as
// it is held, and each renewal keeps the grant's fencing token.
func TestLeaseOutlivesTTL(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	hs := make([]core.Handle, 3) // renewed in one batch
	for i := range hs {
		h, err := p.Mutex(lockName(t)).TryAcquire(ctx)
		require.NoError(t, err)
		hs[i] = h
	}
	select {
	case <-hs[0].Context().Done():
		t.Fatalf("lost while held: %v", context.Cause(hs[0].Context()))
	case <-time.After(2 * testTTL):
	}
	for _, h := range hs {
		require.NoError(t, h.Context().Err())
		require.NoError(t, h.Release(ctx))
	}
}

// A key deleted by hand is lost at the next renewal, and a waiter, woken by
// the watcher, takes the lock right after the delete.
func TestKeyDeletedByHand(t *testing.T) {
	holder := newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	defer h.Release(ctx)

	require.NoError(t, holder.kv.Delete(ctx, h.(*handle).key))
	select {
	case <-h.Context().Done():
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	case <-time.After(testTTL): // the next renewal is due within TTL/3
		t.Fatal("a deleted key was not reported lost")
	}
	require.NoError(t, h.Release(ctx), "releasing a lost handle is harmless")
}

// A semaphore waiter that only the watcher can wake in time: its fallback
// retry is a minute and the holder's lease, in a bucket with a one-minute
// TTL, would not expire sooner. (Mutex waiters are woken by their line:
// line_test.go.)
func TestWaiterWakesOnDelete(t *testing.T) {
	const bucket, ttl = "distlock_test_long", time.Minute
	slow := kit.Backoff{Min: time.Minute, Max: time.Minute}
	holder := newProvider(t, WithBucket(bucket), WithTTL(ttl))
	waiter := newProvider(t, WithBucket(bucket), WithTTL(ttl), WithBackoff(slow))
	ctx := ctxT(t, 30*time.Second)

	for _, how := range []string{"release", "delete by hand"} {
		t.Run(how, func(t *testing.T) {
			name := lockName(t)
			h, err := holder.Semaphore(name, 1).TryAcquire(ctx)
			require.NoError(t, err)
			defer h.Release(ctx)

			got := make(chan core.Handle, 1)
			errc := make(chan error, 1)
			go func() {
				wh, err := waiter.Semaphore(name, 1).Acquire(ctx)
				if err != nil {
					errc <- err
					return
				}
				got <- wh
			}()
			watchKey := semaphoreKeys(name) + ".*"
			require.Eventually(t, func() bool {
				waiter.wmu.Lock()
				defer waiter.wmu.Unlock()
				w := waiter.watches[watchKey]
				return w != nil && w.live.Load()
			}, 10*time.Second, 5*time.Millisecond, "the waiter never started watching")

			if how == "release" {
				require.NoError(t, h.Release(ctx))
			} else {
				require.NoError(t, holder.kv.Delete(ctx, h.(*handle).key))
			}
			select {
			case wh := <-got:
				assert.Greater(t, wh.FencingToken(), h.FencingToken())
				require.NoError(t, wh.Release(ctx))
			case err := <-errc:
				t.Fatal(err)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter was not woken by the delete")
			}
		})
	}
}

func TestSemaphoreSlots(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	name := lockName(t)
	var hs []core.Handle
	var last uint64
	for i := range 3 {
		p := []*Provider{p1, p2}[i%2]
		h, err := p.Semaphore(name, 3).TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		hs = append(hs, h)
	}
	_, err := p1.Semaphore(name, 3).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)

	// A waiter wakes on any slot's release.
	got := make(chan core.Handle, 1)
	go func() {
		h, err := p2.Semaphore(name, 3).Acquire(ctx)
		if err == nil {
			got <- h
		}
		close(got)
	}()
	require.NoError(t, hs[1].Release(ctx))
	h, ok := <-got
	require.True(t, ok, "waiter failed")
	require.Greater(t, h.FencingToken(), last)
	hs[1] = h
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}

func TestMembership(t *testing.T) {
	p := newProvider(t, WithMembersBucket(testBucket+"_members"))
	ctx := ctxT(t, 30*time.Second)
	group := lockName(t)

	members, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Empty(t, members)

	require.NoError(t, p.Register(ctx, group, "b", time.Minute))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute)) // refresh
	require.NoError(t, p.Register(ctx, group+"-other", "c", time.Minute))
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, members)

	require.NoError(t, p.Deregister(ctx, group, "a"))
	require.NoError(t, p.Deregister(ctx, group, "absent"))
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, members)

	require.NoError(t, p.Register(ctx, group, "short", 200*time.Millisecond))
	require.Eventually(t, func() bool {
		m, err := p.Members(ctx, group)
		return err == nil && len(m) == 1 && m[0] == "b"
	}, 10*time.Second, 50*time.Millisecond, "a member past its ttl is still listed")

	for _, tc := range []struct {
		name, group, id string
		ttl             time.Duration
		want            error
	}{
		{"empty group", "", "x", time.Second, core.ErrInvalidName},
		{"empty id", group, "", time.Second, core.ErrInvalidArgument},
		{"zero ttl", group, "x", 0, core.ErrInvalidArgument},
		{"ttl above the bucket's", group, "x", time.Hour, core.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, p.Register(ctx, tc.group, tc.id, tc.ttl), tc.want)
		})
	}
	require.NoError(t, p.Deregister(ctx, group, "b"))
	require.NoError(t, p.Deregister(ctx, group+"-other", "c"))
}

// A member entry of an earlier version has no value: it is listed with an
// empty one, and Announce and Register take it over. Register and an empty
// Announce still write no value, as earlier versions did.
func TestMemberOldFormat(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	group := lockName(t)
	kv, err := p.membersKV(ctx)
	require.NoError(t, err)
	_, err = kv.Put(ctx, memberKey(group, "old"), []byte(`{"id":"old","ttl_ms":60000}`))
	require.NoError(t, err)

	ids, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, ids)
	ms, err := p.Announce(ctx, group, "new", time.Minute, []byte{0xff, 0})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, core.Member{ID: "new", Value: []byte{0xff, 0}}, ms[0])
	assert.Equal(t, "old", ms[1].ID)
	assert.Empty(t, ms[1].Value)
	ms, err = p.Announce(ctx, group, "old", time.Minute, []byte("v"))
	require.NoError(t, err)
	assert.Equal(t, []core.Member{{ID: "new", Value: []byte{0xff, 0}}, {ID: "old", Value: []byte("v")}}, ms)

	fields := func(id string) map[string]any {
		t.Helper()
		e, err := kv.Get(ctx, memberKey(group, id))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(e.Value(), &m))
		return m
	}
	require.NoError(t, p.Register(ctx, group, "old", time.Minute))
	assert.NotContains(t, fields("old"), "value", "Register writes no value")
	_, err = p.Announce(ctx, group, "new", time.Minute, nil)
	require.NoError(t, err)
	assert.NotContains(t, fields("new"), "value", "an empty Announce writes no value")
	for _, id := range []string{"new", "old"} {
		require.NoError(t, p.Deregister(ctx, group, id))
	}
}

// The server restarted under a holder: the handle is lost within the trust
// window, a dead server's errors come back at once instead of a wait, and
// the lock is usable again once the server is back.
func TestServerRestart(t *testing.T) {
	// A TTL of our own on our own server: a longer one leaves a margin
	// (TTL/10) that scheduling noise cannot eat.
	const ttl = 5 * time.Second
	srv := startServer(t)
	js := connect(t, srv.url(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	p := newProviderOn(t, js, WithTTL(ttl), WithTimeout(time.Second))
	ctx := ctxT(t, time.Minute)
	name := lockName(t)

	start := time.Now()
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)

	srv.stop()
	select {
	case <-h.Context().Done():
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
		require.Less(t, time.Since(start), ttl, "lost after the server could have freed the lock")
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("the handle was not lost while the server was down")
	}

	_, err = p.Mutex(lockName(t)).Acquire(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, core.ErrNotAcquired, "a dead server must not read as a busy lock")
	require.NoError(t, ctx.Err(), "Acquire waited for its context instead of failing")

	srv.restart()
	h2, err := p.Mutex(name).Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h2.FencingToken(), h.FencingToken())
	require.NoError(t, h.Release(ctx), "releasing the lost handle leaves the new grant alone")
	require.NoError(t, h2.Context().Err())
	require.NoError(t, h2.Release(ctx))
}

func TestCloseLosesHandles(t *testing.T) {
	js := connect(t, locktest.RequireEnv(t, "DISTLOCK_NATS_URL"))
	p, err := New(js, WithBucket(testBucket), WithTTL(testTTL))
	require.NoError(t, err)
	ctx := ctxT(t, 10*time.Second)
	h, err := p.Mutex(lockName(t)).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	require.NoError(t, h.Release(ctx), "a closed Provider still releases what it held")
	_, err = p.Mutex(lockName(t)).Acquire(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

// A Provider reuses the keys of its released read grants, so sequential
// readers leave one reader key behind, not one per read.
func TestReaderKeysReused(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	rw := p.RWMutex(lockName(t)).(*rwMutex)
	var last uint64
	for range 10 {
		h, err := rw.RLocker().TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		require.NoError(t, h.Release(ctx))
	}
	info, err := p.stream.Info(ctx, jetstream.WithSubjectFilter(p.prefix+rw.rPrefix+".*"))
	require.NoError(t, err)
	assert.Len(t, info.State.Subjects, 1)

	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err, "released readers' keys do not block a writer")
	require.Greater(t, w.FencingToken(), last)
	require.NoError(t, w.Release(ctx))
}
