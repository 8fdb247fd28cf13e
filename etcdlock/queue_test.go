package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

// waiter is an Acquire started on a goroutine.
type waiter struct {
	name string
	got  <-chan core.Handle
	errc <-chan error
}

// enqueue starts l.Acquire and waits until its key is in line: the
// prefix holds n keys.
func enqueue(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string, n int64, name string, l core.Locker) waiter {
	t.Helper()
	got, errc := locktest.AcquireAsync(ctx, l)
	requireQueued(t, cli, prefix, n)
	return waiter{name, got, errc}
}

// Waiters of several Providers are granted in arrival order.
func TestFIFO(t *testing.T) {
	ps := []*Provider{newProvider(t), newProvider(t), newProvider(t)}
	cli := connect(t, endpoints(t))
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	prefix := ps[0].queue(name, mutexKind, 1).prefix
	h, err := ps[0].Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	var ws []waiter
	for i := range 6 {
		ws = append(ws, enqueue(t, ctx, cli, prefix, int64(i+2), fmt.Sprint(i), ps[i%3].Mutex(name)))
	}
	last := h.FencingToken()
	require.NoError(t, h.Release(ctx))
	for _, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		assert.Greater(t, g.FencingToken(), last, "waiter %s", w.name)
		last = g.FencingToken()
		for _, o := range ws {
			select {
			case h := <-o.got:
				t.Fatalf("waiter %s granted while %s holds", o.name, w.name)
				_ = h.Release(ctx)
			default:
			}
		}
		require.NoError(t, g.Release(ctx))
	}
}

// rangeCounter counts the KV Range calls of a client that read the keys
// ahead of a contender: not a grant's read of the key right behind it
// (Provider.findNext, the only read with a minimum create revision).
type rangeCounter struct{ n atomic.Int64 }

func (c *rangeCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*etcdserverpb.RangeRequest); ok && strings.HasSuffix(method, "/Range") && r.MinCreateRevision == 0 {
		c.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// countingClient returns a client that counts its KV Range calls in c,
// closed by t.Cleanup.
func countingClient(t *testing.T, c *rangeCounter) *clientv3.Client {
	t.Helper()
	return dialWith(t, grpc.WithChainUnaryInterceptor(c.intercept))
}

// dialWith returns a client of the test server dialled with opts, closed
// by t.Cleanup.
func dialWith(t *testing.T, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(t), Logger: zap.NewNop(), DialOptions: opts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A release wakes only the contender it unblocks, and admits it without a
// request: with a line of waiters in separate Providers that wait on the
// lock's watch (their bells are not watched yet), no waiter reads the
// queue, neither the one granted nor those further back.
func TestNoHerd(t *testing.T) {
	hd := holdMutex(t)
	ws, counters := countingLine(t, hd, 6, false)
	before := loads(counters)
	require.NoError(t, hd.h.Release(hd.ctx))
	for i, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		assert.Equal(t, before, loads(counters), "reads of the waiters by the time %d was granted", i)
		require.NoError(t, g.Release(hd.ctx))
	}
}

// One revision may delete several keys ahead of a waiter (a revoked or
// expired lease takes all its keys at once): the waiter counts each of
// them, and the deletion admits it without a read.
func TestSeveralDeletedAtOnce(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	readers := newProvider(t)
	for range 2 {
		_, err := readers.RWMutex(name).RLocker().TryAcquire(ctx)
		require.NoError(t, err)
	}
	p, counter := countingProvider(t)
	prefix := p.queue(name, rwKind, 1).prefix
	w := enqueue(t, ctx, cli, prefix, 3, "writer", p.RWMutex(name))
	requireSettled(t, p, prefix)
	before := counter.n.Load()
	readers.lmu.Lock()
	lease := readers.sess.id
	readers.lmu.Unlock()
	_, err := cli.Revoke(ctx, lease)
	require.NoError(t, err)
	g := locktest.Receive(t, w.got, w.errc)
	assert.Equal(t, before, counter.n.Load(), "the writer read the queue")
	require.NoError(t, g.Release(ctx))
}

// gatedStream holds what a client stream sends until gate closes.
type gatedStream struct {
	grpc.ClientStream
	gate <-chan struct{}
}

func (s *gatedStream) SendMsg(m any) error {
	<-s.gate
	return s.ClientStream.SendMsg(m)
}

// A deletion between a contender's read and the start of its Provider's
// watch is not missed: the watch starts from the present, and the
// contender, whose read is older, reads the queue again.
func TestDeletedBeforeWatch(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	gate := make(chan struct{})
	var open sync.Once
	watches := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/Watch") {
			return cs, err
		}
		return &gatedStream{cs, gate}, nil
	}
	wcli := dialWith(t, grpc.WithChainStreamInterceptor(watches))
	p := newProviderOn(t, wcli)
	noFallbackReads(p)
	t.Cleanup(func() { open.Do(func() { close(gate) }) }) // before p.Close, which waits for its watches
	prefix := p.queue(name, mutexKind, 1).prefix
	w := enqueue(t, ctx, cli, prefix, 2, "waiter", p.Mutex(name))
	require.NoError(t, h.Release(ctx)) // while the waiter's watch cannot start
	requireQueued(t, cli, prefix, 1)
	open.Do(func() { close(gate) })
	g := locktest.Receive(t, w.got, w.errc)
	require.NoError(t, g.Release(ctx))
}

// A contender behind more keys than its enqueue named reads the queue once
// the named ones are gone (the unnamed may be gone too, or not), and is
// granted in its turn.
func TestLongLine(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	line := newProvider(t)
	prefix := line.queue(name, mutexKind, 1).prefix
	h, err := line.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	ws := make([]waiter, named)
	for i := range ws {
		ws[i] = enqueue(t, ctx, cli, prefix, int64(i+2), fmt.Sprint(i), line.Mutex(name))
	}
	p, counter := countingProvider(t)
	noBell(p) // on the lock's watch, which crosses off the named keys
	last := enqueue(t, ctx, cli, prefix, named+2, "last", p.Mutex(name))
	requireSettled(t, p, prefix)
	before := counter.n.Load()
	require.NoError(t, h.Release(ctx))
	for _, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		requireWaiting(t, last)
		require.NoError(t, g.Release(ctx))
	}
	g := locktest.Receive(t, last.got, last.errc)
	assert.Equal(t, before+1, counter.n.Load(), "reads of the contender behind the line")
	require.NoError(t, g.Release(ctx))
}

// Readers wait only for the writers ahead of them; a writer waits for
// every key ahead of it.
func TestRWQueue(t *testing.T) {
	ps := []*Provider{newProvider(t), newProvider(t)}
	cli := connect(t, endpoints(t))
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	prefix := ps[0].queue(name, rwKind, 1).prefix
	rw := func(i int) core.RWLocker { return ps[i%2].RWMutex(name) }

	r1, err := rw(0).RLocker().TryAcquire(ctx)
	require.NoError(t, err)
	w1 := enqueue(t, ctx, cli, prefix, 2, "w1", rw(1))
	r2 := enqueue(t, ctx, cli, prefix, 3, "r2", rw(0).RLocker())
	r3 := enqueue(t, ctx, cli, prefix, 4, "r3", rw(1).RLocker())
	w2 := enqueue(t, ctx, cli, prefix, 5, "w2", rw(0))

	require.NoError(t, r1.Release(ctx))
	gw1 := locktest.Receive(t, w1.got, w1.errc)
	requireWaiting(t, r2, r3, w2)
	require.NoError(t, gw1.Release(ctx))
	gr2 := locktest.Receive(t, r2.got, r2.errc)
	gr3 := locktest.Receive(t, r3.got, r3.errc) // readers share
	requireWaiting(t, w2)
	require.NoError(t, gr3.Release(ctx))
	requireWaiting(t, w2)
	require.NoError(t, gr2.Release(ctx))
	gw2 := locktest.Receive(t, w2.got, w2.errc)
	assert.Greater(t, gw2.FencingToken(), gr3.FencingToken())
	require.NoError(t, gw2.Release(ctx))
}

// A semaphore admits the first max keys, and its waiters in arrival order.
func TestSemaphoreFIFO(t *testing.T) {
	ps := []*Provider{newProvider(t), newProvider(t)}
	cli := connect(t, endpoints(t))
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	prefix := ps[0].queue(name, semaphoreKind, 2).prefix
	sem := func(i int) core.Locker { return ps[i%2].Semaphore(name, 2) }
	h1, err := sem(0).TryAcquire(ctx)
	require.NoError(t, err)
	h2, err := sem(1).TryAcquire(ctx)
	require.NoError(t, err)
	a := enqueue(t, ctx, cli, prefix, 3, "a", sem(0))
	b := enqueue(t, ctx, cli, prefix, 4, "b", sem(1))
	c := enqueue(t, ctx, cli, prefix, 5, "c", sem(0))

	require.NoError(t, h2.Release(ctx))
	ga := locktest.Receive(t, a.got, a.errc)
	requireWaiting(t, b, c)
	require.NoError(t, h1.Release(ctx))
	gb := locktest.Receive(t, b.got, b.errc)
	requireWaiting(t, c)
	require.NoError(t, ga.Release(ctx))
	gc := locktest.Receive(t, c.got, c.errc)
	assert.Greater(t, gc.FencingToken(), gb.FencingToken())
	require.NoError(t, gb.Release(ctx))
	require.NoError(t, gc.Release(ctx))
}

// requireSettled waits until p's watch of the lock under prefix is
// confirmed and none of its waits has a read to make or in flight (the
// read that follows a watch's start, when the queue changed meanwhile):
// what they learn from then on comes from the watch alone.
func requireSettled(t *testing.T, p *Provider, prefix string) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.bmu.Lock()
		defer p.bmu.Unlock()
		w := p.watches[prefix]
		if w == nil || w.from == 0 {
			return false
		}
		for c := range w.cs {
			c.mu.Lock()
			busy := c.broken || c.reading
			c.mu.Unlock()
			if busy {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the watch of %s", prefix)
}

// requireWaiting fails when one of ws was granted; a grant that comes
// later than the check is caught by the caller's next Receive.
func requireWaiting(t *testing.T, ws ...waiter) {
	t.Helper()
	for _, w := range ws {
		select {
		case h := <-w.got:
			_ = h.Release(context.Background())
			t.Fatalf("%s was granted out of turn", w.name)
		case err := <-w.errc:
			t.Fatalf("%s: %v", w.name, err)
		default:
		}
	}
}

// countingProvider returns a Provider whose reads of a queue are counted,
// and that makes no fallback reads (noFallbackReads).
func countingProvider(t *testing.T) (*Provider, *rangeCounter) {
	t.Helper()
	counter := &rangeCounter{}
	p := newProviderOn(t, countingClient(t, counter))
	noFallbackReads(p)
	return p, counter
}

// noFallbackReads makes p's waits read the queue only when what they heard
// calls for it, never after hearing nothing for a while.
func noFallbackReads(p *Provider) { p.recheck = kit.Backoff{Min: time.Hour, Max: time.Hour} }
