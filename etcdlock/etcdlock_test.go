package etcdlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// Bad options are reported by New, before any I/O: a client to a port
// where nothing listens gives the same errors.
func TestNewRejectsBadOptions(t *testing.T) {
	cli := connect(t, []string{"127.0.0.1:1"})
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"zero TTL", []Option{WithTTL(0)}},
		{"negative TTL", []Option{WithTTL(-time.Second)}},
		{"sub-second TTL", []Option{WithTTL(500 * time.Millisecond)}},
		{"fractional TTL", []Option{WithTTL(1500 * time.Millisecond)}},
		{"TTL above etcd's maximum", []Option{WithTTL(MaxTTL + time.Second)}},
		{"empty prefix", []Option{WithPrefix("")}},
		{"prefix not UTF-8", []Option{WithPrefix("a\xff")}},
		{"empty identity", []Option{WithIdentity("")}},
		{"identity too long", []Option{WithIdentity(strings.Repeat("x", MaxIdentity+1))}},
		{"zero timeout", []Option{WithTimeout(0)}},
		{"negative timeout", []Option{WithTimeout(-time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(cli, tc.opts...)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.Nil(t, p)
		})
	}
	t.Run("nil client", func(t *testing.T) {
		_, err := New(nil)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	})
	t.Run("nil option is ignored", func(t *testing.T) {
		p, err := New(cli, nil)
		require.NoError(t, err)
		require.NoError(t, p.Close())
	})
}

// Bad names and arguments, and done contexts, fail at the call with an
// error naming the backend and matching a core sentinel.
func TestBadArguments(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 10*time.Second)
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"mutex empty name", func() error { _, err := p.Mutex("").TryAcquire(ctx); return err }, core.ErrInvalidName},
		{"mutex bad UTF-8", func() error { _, err := p.Mutex("a\xffb").Acquire(ctx); return err }, core.ErrInvalidName},
		{"rwmutex empty name", func() error { _, err := p.RWMutex("").Acquire(ctx); return err }, core.ErrInvalidName},
		{"rwmutex read side bad UTF-8", func() error { _, err := p.RWMutex("\xff").RLocker().TryAcquire(ctx); return err }, core.ErrInvalidName},
		{"semaphore empty name", func() error { _, err := p.Semaphore("", 2).TryAcquire(ctx); return err }, core.ErrInvalidName},
		{"semaphore max 0", func() error { _, err := p.Semaphore(lockName(t), 0).TryAcquire(ctx); return err }, core.ErrInvalidArgument},
		{"semaphore max -1", func() error { _, err := p.Semaphore(lockName(t), -1).Acquire(ctx); return err }, core.ErrInvalidArgument},
		{"done ctx acquire", func() error { _, err := p.Mutex(lockName(t)).Acquire(done); return err }, context.Canceled},
		{"done ctx try", func() error { _, err := p.Mutex(lockName(t)).TryAcquire(done); return err }, core.ErrNotAcquired},
		{"done ctx semaphore", func() error { _, err := p.Semaphore(lockName(t), 2).Acquire(done); return err }, core.ErrNotAcquired},
		{"holder empty name", func() error { _, _, err := p.Holder(ctx, ""); return err }, core.ErrInvalidName},
		{"register empty group", func() error { return p.Register(ctx, "", "i", time.Second) }, core.ErrInvalidName},
		{"register empty id", func() error { return p.Register(ctx, "g", "", time.Second) }, core.ErrInvalidArgument},
		{"register zero ttl", func() error { return p.Register(ctx, "g", "i", 0) }, core.ErrInvalidArgument},
		{"register negative ttl", func() error { return p.Register(ctx, "g", "i", -time.Second) }, core.ErrInvalidArgument},
		{"heartbeat absurd ttl", func() error { _, err := p.Heartbeat(ctx, "g", "i", MaxTTL+time.Second); return err }, core.ErrInvalidArgument},
		{"deregister empty id", func() error { return p.Deregister(ctx, "g", "") }, core.ErrInvalidArgument},
		{"members empty group", func() error { _, err := p.Members(ctx, ""); return err }, core.ErrInvalidName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
			var e *core.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "etcd", e.Backend)
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

	// A waiter behind the holder changes nothing.
	other := newProvider(t)
	got, errc := locktest.AcquireAsync(ctx, other.Mutex(name))
	in := other.Mutex(name).(core.Inspector)
	holder, held, err := in.Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, core.Holder{ID: "worker-7", Token: h.FencingToken()}, holder)

	require.NoError(t, h.Release(ctx))
	next := locktest.Receive(t, got, errc)
	holder, held, err = in.Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, next.FencingToken(), holder.Token)
	assert.Equal(t, other.Identity(), holder.ID)
	require.NoError(t, next.Release(ctx))
	_, held, err = in.Holder(ctx)
	require.NoError(t, err)
	assert.False(t, held)
}

// An RWMutex's write side names its writer, and no holder while readers
// hold it.
func TestRWHolder(t *testing.T) {
	p := newProvider(t, WithIdentity("writer"))
	ctx := ctxT(t, 10*time.Second)
	rw := p.RWMutex(lockName(t))
	in := rw.(core.Inspector)
	r, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err)
	_, held, err := in.Holder(ctx)
	require.NoError(t, err)
	assert.False(t, held, "readers are no single holder")
	require.NoError(t, r.Release(ctx))
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	holder, held, err := in.Holder(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, core.Holder{ID: "writer", Token: w.FencingToken()}, holder)
	require.NoError(t, w.Release(ctx))
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

// The Keeper keeps the lease alive: a grant outlives its TTL while held,
// and many grants share one lease, renewed in one keep-alive.
func TestLeaseOutlivesTTL(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, 30*time.Second)
	hs := make([]core.Handle, 3)
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
		s, ok := h.(core.LeaseReporter).Lease()
		require.True(t, ok)
		assert.Positive(t, s.Renewals)
		assert.Equal(t, hs[0].(*handle).s, h.(*handle).s, "one lease per Provider")
		require.NoError(t, h.Release(ctx))
	}
}

// Close revokes the lease: another Provider takes the lock at once, the
// closed Provider's handles are lost, its waits end with ErrClosed, and
// a release after Close still succeeds.
func TestCloseRevokesLease(t *testing.T) {
	cli := connect(t, endpoints(t))
	p, err := New(cli, WithPrefix(testPrefix), WithTTL(30*time.Second))
	require.NoError(t, err)
	other := newProvider(t)
	ctx := ctxT(t, 20*time.Second)
	name := lockName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	waiting, werrc := locktest.AcquireAsync(ctx, p.Mutex(name))
	requireQueued(t, cli, p.queue(name, mutexKind, 1).prefix, 2)

	require.NoError(t, p.Close())
	require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	select {
	case err := <-werrc:
		require.ErrorIs(t, err, ErrClosed)
	case h := <-waiting:
		t.Fatalf("granted token %d after Close", h.FencingToken())
	case <-ctx.Done():
		t.Fatal("Acquire still waits after Close")
	}
	start := time.Now()
	h2, err := other.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err, "the revoked lease took the keys with it")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, h.Release(ctx))
	require.NoError(t, h2.Context().Err(), "a stale release leaves the next grant alone")
	require.NoError(t, h2.Release(ctx))
	_, err = p.Mutex(name).Acquire(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, p.Close())
}

// requireQueued waits until prefix holds n keys.
func requireQueued(t *testing.T, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == n
	}, 10*time.Second, 5*time.Millisecond, "%d keys under %s", n, prefix)
}
