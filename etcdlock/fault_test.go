package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// A dead server gives the client's error within the Provider's timeout,
// never an error that reads as a busy lock or a wait as long as ctx.
func TestDeadServer(t *testing.T) {
	locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS") // run where make test runs
	cli := connect(t, []string{"127.0.0.1:1"})        // nothing listens there
	p := newProviderOn(t, cli, WithTimeout(time.Second))
	ctx := ctxT(t, 30*time.Second)
	for _, l := range []core.Locker{p.Mutex("x"), p.RWMutex("x").RLocker(), p.Semaphore("x", 2)} {
		for _, acquire := range []func(context.Context) (core.Handle, error){l.TryAcquire, l.Acquire} {
			start := time.Now()
			_, err := acquire(ctx)
			require.Error(t, err)
			assert.NotErrorIs(t, err, core.ErrNotAcquired)
			var e *core.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "etcd", e.Backend)
			assert.Less(t, time.Since(start), 5*time.Second)
		}
	}
	_, err := p.Members(ctx, "g")
	require.Error(t, err)
}

// The server stops under a holder: the handle is lost before its lease
// could expire, a dead server's errors come back within the timeout, and
// once the server is back the lock is granted again, with a larger token,
// when the lost grant's lease expires (a restart keeps leases).
func TestServerRestart(t *testing.T) {
	const ttl = 4 * time.Second
	srv := startServer(t)
	cli := connect(t, srv.endpoints())
	p := newProviderOn(t, cli, WithTTL(ttl), WithTimeout(time.Second))
	ctx := ctxT(t, 2*time.Minute)
	name := lockName(t)

	start := time.Now()
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	srv.stop()
	select {
	case <-h.Context().Done():
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
		require.Less(t, time.Since(start), ttl, "lost after the server could have freed the lock")
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the handle was not lost while the server was down")
	}
	_, err = p.Mutex(lockName(t)).Acquire(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, core.ErrNotAcquired, "a dead server must not read as a busy lock")
	require.NoError(t, ctx.Err(), "Acquire waited for its context instead of failing")

	srv.start()
	// A restarted member may take a while to serve (a loaded machine): an
	// Acquire before that fails, as the one above did.
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Get(rctx, "ready")
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the restarted member does not answer")
	h2, err := p.Mutex(name).Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h2.FencingToken(), h.FencingToken())
	require.NoError(t, h.Release(ctx), "releasing the lost handle leaves the new grant alone")
	require.NoError(t, h2.Context().Err())
	require.NoError(t, h2.Release(ctx))
}

// A frozen server (SIGSTOP) answers nothing: the holder's handle ends
// within its trust window, before the server could expire its lease, and
// nobody is granted the lock while the holder may still think it holds it.
func TestServerFreeze(t *testing.T) {
	const ttl = 4 * time.Second
	srv := startServer(t)
	p := newProviderOn(t, connect(t, srv.endpoints()), WithTTL(ttl), WithTimeout(time.Second))
	other := newProviderOn(t, connect(t, srv.endpoints()), WithTTL(ttl), WithTimeout(time.Second))
	ctx := ctxT(t, 2*time.Minute)
	name := lockName(t)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	next, nerrc := locktest.AcquireAsync(ctx, other.Mutex(name))
	requireQueued(t, connect(t, srv.endpoints()), p.queue(name, mutexKind, 1).prefix, 2)

	frozen := time.Now()
	srv.freeze()
	select {
	case <-h.Context().Done():
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
		assert.Less(t, time.Since(frozen), ttl, "the holder stops before its lease can expire")
	case <-time.After(ttl + 10*time.Second):
		srv.thaw()
		t.Fatal("the handle was not lost while the server was frozen")
	}
	srv.thaw()
	g := locktest.Receive(t, next, nerrc)
	assert.Greater(t, g.FencingToken(), h.FencingToken())
	require.NoError(t, h.Release(ctx))
	require.NoError(t, g.Release(ctx))
}

// A waiter whose key goes (its lease revoked by hand) lines up again, at
// the end of the line, and is granted the lock in the end.
func TestWaiterQueuesAgain(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	cli := connect(t, endpoints(t))
	holder, p := newProvider(t), newProvider(t)
	name := lockName(t)
	prefix := holder.queue(name, mutexKind, 1).prefix
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	got, errc := locktest.AcquireAsync(ctx, p.Mutex(name))
	requireQueued(t, cli, prefix, 2)
	s, err := p.lease(ctx)
	require.NoError(t, err)
	_, err = cli.Revoke(ctx, s.id)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p.lmu.Lock()
		defer p.lmu.Unlock()
		return p.sess != s
	}, 10*time.Second, 10*time.Millisecond, "the waiter takes a new lease")
	requireQueued(t, cli, prefix, 2)
	require.NoError(t, h.Release(ctx))
	g := locktest.Receive(t, got, errc)
	assert.Greater(t, g.FencingToken(), h.FencingToken())
	require.NoError(t, g.Release(ctx))
}

// A release whose delete fails leaves the key on the Provider's lease,
// which its other grants keep alive: the Provider deletes it once the
// server answers again, and the lock frees although the Provider lives on.
func TestFailedReleaseRetried(t *testing.T) {
	const ttl = 4 * time.Second
	srv := startServer(t)
	cli := connect(t, srv.endpoints())
	p := newProviderOn(t, cli, WithTTL(ttl), WithTimeout(300*time.Millisecond))
	other := newProviderOn(t, connect(t, srv.endpoints()), WithTTL(ttl))
	ctx := ctxT(t, time.Minute)
	name := lockName(t)
	keep, err := p.Mutex(lockName(t)).TryAcquire(ctx) // keeps the lease alive
	require.NoError(t, err)
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	srv.freeze()
	err = h.Release(ctx)
	srv.thaw()
	require.Error(t, err, "the delete could not reach the frozen server")
	_, err = cli.Get(ctx, "thawed") // the server answers again
	require.NoError(t, err)
	g, err := other.Mutex(name).Acquire(ctxT(t, ttl))
	require.NoError(t, err, "the orphaned key was not deleted before its lease would have expired")
	require.NoError(t, keep.Context().Err())
	require.NoError(t, g.Release(ctx))
	require.NoError(t, keep.Release(ctx))
}

// An acquire's write whose outcome the client cannot know (here it
// landed, and the member died before its answer came) may leave a key in
// line for nobody, on the lease that the Provider's other keys keep alive,
// and the member being down, the first delete of it fails too. The
// Provider deletes the key once the member is back, so the lock frees
// although the Provider lives on and its lease never lapses.
func TestUnknownWriteOutcome(t *testing.T) {
	const ttl = 10 * time.Second
	srv := startServer(t)
	cli := connect(t, srv.endpoints())
	p := newProviderOn(t, cli, WithTTL(ttl), WithTimeout(time.Second))
	other := newProviderOn(t, connect(t, srv.endpoints()), WithTTL(ttl))
	ctx := ctxT(t, time.Minute)
	keep, err := p.Mutex(lockName(t)).TryAcquire(ctx) // keeps the lease alive
	require.NoError(t, err)
	name := lockName(t)
	_, _, _, err = p.queue(name, mutexKind, 1).put(ctx, exclusive,
		func(ctx context.Context, key string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
			_, err := cli.Put(ctx, key, p.Identity(), clientv3.WithLease(lease))
			require.NoError(t, err)
			srv.stop()
			return nil, errors.New("the connection broke before the answer came")
		})
	require.Error(t, err)
	srv.start()
	g, err := other.Mutex(name).Acquire(ctxT(t, ttl))
	require.NoError(t, err, "the key of the write with an unknown outcome still stands in line")
	require.NoError(t, keep.Context().Err(), "the lease lapsed: its keys went with it")
	require.NoError(t, g.Release(ctx))
	require.NoError(t, keep.Release(ctx))
}

// A write with an unknown outcome may land after its Provider swept the
// key (a frozen member passing it on when it thaws): the sweep's void mark
// makes it fail, so it leaves nothing in line.
func TestLateWriteAfterSweep(t *testing.T) {
	cli := connect(t, endpoints(t))
	p, other := newProvider(t), newProvider(t)
	ctx := ctxT(t, time.Minute)
	keep, err := p.Mutex(lockName(t)).TryAcquire(ctx) // keeps the lease alive
	require.NoError(t, err)
	name := lockName(t)
	var key string
	var lease clientv3.LeaseID
	_, _, _, err = p.queue(name, mutexKind, 1).put(ctx, exclusive,
		func(ctx context.Context, k string, l clientv3.LeaseID) (*clientv3.TxnResponse, error) {
			key, lease = k, l
			return nil, errors.New("the request is still in flight")
		})
	require.Error(t, err)
	require.Eventually(t, func() bool {
		p.omu.Lock()
		defer p.omu.Unlock()
		return len(p.orphans) == 0
	}, 10*time.Second, 10*time.Millisecond, "the orphan is swept")
	// The write lands now, with the condition every write of a key carries.
	resp, err := cli.Txn(ctx).If(p.unvoided(key)).Then(clientv3.OpPut(key, p.Identity(), clientv3.WithLease(lease))).Commit()
	require.NoError(t, err)
	assert.False(t, resp.Succeeded, "the late write was applied")
	g, err := other.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Release(ctx))
	require.NoError(t, keep.Release(ctx))
}
