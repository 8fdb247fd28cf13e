package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/core/locktest"
)

func TestRingsRoundTrip(t *testing.T) {
	rs := []ring{
		{kind: knockRing, key: "p/m/x/xab.1", rev: 7, to: "p/m/x/xcd.2"},
		{kind: clearedRing, key: "", rev: -1, to: "p/m/x/xef.3"},
	}
	var v []byte
	for _, r := range rs {
		v = appendRing(v, r)
	}
	got, err := parseRings(v)
	require.NoError(t, err)
	assert.Equal(t, rs, got)
	for n := 1; n < len(v); n++ {
		if _, err := parseRings(v[:n]); err == nil {
			// A cut that ends on a record's end is a shorter valid value.
			one := appendRing(nil, rs[0])
			assert.Equal(t, len(one), n, "a value cut at %d parsed", n)
		}
	}
}

func TestOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		key, id string
		ok      bool
	}{
		{"p/m/n/x0123abcd.1f", "0123abcd", true},
		{"p/m/n/r0123abcd.1f", "0123abcd", true},
		{"p/m/n/x7b2-1f", "", false}, // a name from a Provider without a bell
		{"p/m/n/x.1f", "", false},
		{"p/m/other/x01.1", "", false},
		{"p/m/n/", "", false},
	} {
		id, ok := ownerOf("p/m/n/", tc.key)
		assert.Equal(t, tc.ok, ok, tc.key)
		assert.Equal(t, tc.id, id, tc.key)
	}
}

// warmBell waits until p's bell is watched, so that its waits knock
// instead of joining their lock's watch.
func warmBell(t *testing.T, p *Provider) {
	t.Helper()
	require.Eventually(t, p.bellReady, 10*time.Second, time.Millisecond, "the bell of %s", p.id)
}

// requireKnocked waits until p has n waits that knocked and have nothing
// to read: what they learn from then on comes from rings.
func requireKnocked(t *testing.T, p *Provider, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.bells.mu.Lock()
		defer p.bells.mu.Unlock()
		if len(p.bells.waits) != n {
			return false
		}
		for _, c := range p.bells.waits {
			c.mu.Lock()
			busy := c.broken || c.reading || c.knocked == (aheadKey{})
			c.mu.Unlock()
			if busy {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the knocks of %s", p.id)
}

// A mutex's waiters in separate Providers, once their bells are watched,
// wait without a watch of the lock's keys: each release rings the Provider
// of the waiter right behind it, which it admits without a read.
func TestBellsHandOver(t *testing.T) {
	const n = 5
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	prefix := holder.queue(name, mutexKind, 1).prefix
	counters := make([]*rangeCounter, n)
	ws := make([]waiter, n)
	ps := make([]*Provider, n)
	for i := range n {
		ps[i], counters[i] = countingProvider(t)
		warmBell(t, ps[i])
		ws[i] = enqueue(t, ctx, cli, prefix, int64(i+2), fmt.Sprint(i), ps[i].Mutex(name))
		requireKnocked(t, ps[i], 1)
	}
	before := make([]int64, n)
	for i, p := range ps {
		before[i] = counters[i].n.Load()
		p.bmu.Lock()
		assert.Nil(t, p.watches[prefix], "waiter %d watches the lock's keys", i)
		p.bmu.Unlock()
	}
	last := h.FencingToken()
	require.NoError(t, h.Release(ctx))
	for i, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		assert.Greater(t, g.FencingToken(), last, "waiter %d", i)
		last = g.FencingToken()
		requireWaiting(t, ws[i+1:]...)
		require.NoError(t, g.Release(ctx))
	}
	for j, c := range counters {
		assert.Equal(t, before[j], c.n.Load(), "reads of waiter %d", j)
	}
}

// A knock that arrives once the key it knocks on was released is answered
// at once: the release rang nobody, and the answer admits the waiter.
func TestLateKnockAnswered(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	warmBell(t, holder)
	gate := make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	knocks := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*etcdserverpb.PutRequest); ok && strings.Contains(string(r.Key), bellKind) {
			<-gate
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	wcli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(t), Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(knocks)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = wcli.Close() })
	p := newProviderOn(t, wcli)
	noFallbackReads(p)
	p.follow = time.Hour // only the answer to the knock can admit it
	warmBell(t, p)

	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	prefix := holder.queue(name, mutexKind, 1).prefix
	w := enqueue(t, ctx, cli, prefix, 2, "waiter", p.Mutex(name))
	requireKnocked(t, p, 1)
	require.NoError(t, h.Release(ctx)) // while the knock is held back
	requireQueued(t, cli, prefix, 1)
	requireWaiting(t, w)
	open.Do(func() { close(gate) })
	g := locktest.Receive(t, w.got, w.errc)
	assert.Greater(t, g.FencingToken(), h.FencingToken())
	require.NoError(t, g.Release(ctx))
}

// A key that goes without a ring (its Provider's lease was revoked: the
// Provider died, say) still lets the waiter that knocked on it through:
// the waiter watches the key too, from Provider.follow on.
func TestBellSilentDeath(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	p, _ := countingProvider(t)
	warmBell(t, p)
	prefix := holder.queue(name, mutexKind, 1).prefix
	w := enqueue(t, ctx, cli, prefix, 2, "waiter", p.Mutex(name))
	requireKnocked(t, p, 1)
	holder.lmu.Lock()
	lease := holder.sess.id
	holder.lmu.Unlock()
	_, err = cli.Revoke(ctx, lease)
	require.NoError(t, err)
	g := locktest.Receive(t, w.got, w.errc)
	assert.Greater(t, g.FencingToken(), h.FencingToken())
	require.NoError(t, g.Release(ctx))
}

// A waiter that gives up in the middle of the line tells the waiter right
// behind it, which had no reason to knock on it: that one reads the line
// and knocks on the holder, whose release then rings it.
func TestBellGiveUpInLine(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	name := lockName(t)
	cli := connect(t, endpoints(t))
	holder := newProvider(t)
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	prefix := holder.queue(name, mutexKind, 1).prefix
	quitter, last := newProvider(t), newProvider(t)
	noFallbackReads(last)
	last.follow = time.Hour // only the quitter's ring can send it on
	warmBell(t, quitter)
	warmBell(t, last)
	qctx, quit := context.WithCancel(ctx)
	_, qerrc := locktest.AcquireAsync(qctx, quitter.Mutex(name))
	requireQueued(t, cli, prefix, 2)
	requireKnocked(t, quitter, 1)
	w := enqueue(t, ctx, cli, prefix, 3, "last", last.Mutex(name))
	requireKnocked(t, last, 1)
	quit()
	require.Error(t, <-qerrc)
	requireQueued(t, cli, prefix, 2)
	requireWaiting(t, w)
	require.NoError(t, h.Release(ctx))
	g := locktest.Receive(t, w.got, w.errc)
	require.NoError(t, g.Release(ctx))
}
