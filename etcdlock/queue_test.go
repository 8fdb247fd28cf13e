package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// rangeCounter counts the KV Range calls of a client.
type rangeCounter struct{ n atomic.Int64 }

func (c *rangeCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasSuffix(method, "/Range") {
		c.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A release wakes only the contender right behind it: with a line of
// waiters in separate Providers, each handover costs the next waiter at
// most one read, and the waiters further back none.
func TestNoHerd(t *testing.T) {
	const n = 6
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	prefix := holder.queue(name, mutexKind, 1).prefix
	counters := make([]*rangeCounter, n)
	ws := make([]waiter, n)
	for i := range n {
		counters[i] = &rangeCounter{}
		wcli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(t), Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counters[i].intercept)}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = wcli.Close() })
		p := newProviderOn(t, wcli)
		p.recheck = kit.Backoff{Min: time.Hour, Max: time.Hour} // no fallback reads
		ws[i] = enqueue(t, ctx, cli, prefix, int64(i+2), fmt.Sprint(i), p.Mutex(name))
	}
	reads := func() []int64 {
		out := make([]int64, n)
		for i, c := range counters {
			out[i] = c.n.Load()
		}
		return out
	}
	before := reads()
	require.NoError(t, h.Release(ctx))
	for i, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		after := reads()
		for j := i + 1; j < n; j++ {
			assert.Equal(t, before[j], after[j], "waiter %d read the queue when %d was granted", j, i)
		}
		if i == 0 {
			assert.Equal(t, before[0], after[0], "the first waiter, right behind the holder, needs no read")
		} else {
			assert.LessOrEqual(t, after[i]-before[i], int64(1), "waiter %d", i)
		}
		require.NoError(t, g.Release(ctx))
	}
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
