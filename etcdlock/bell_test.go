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
	"google.golang.org/grpc"

	"github.com/distlock/distlock/core"
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

// held is a mutex held by a Provider of its own, for the tests of its line.
type held struct {
	ctx    context.Context
	cli    *clientv3.Client // a client of the test's, to watch the line
	name   string
	prefix string
	holder *Provider
	h      core.Handle
}

func holdMutex(t *testing.T) held {
	t.Helper()
	hd := held{ctx: ctxT(t, 60*time.Second), cli: connect(t, endpoints(t)), name: lockName(t), holder: newProvider(t)}
	hd.prefix = hd.holder.queue(hd.name, mutexKind, 1).prefix
	var err error
	hd.h, err = hd.holder.Mutex(hd.name).TryAcquire(hd.ctx)
	require.NoError(t, err)
	return hd
}

// countingLine lines up n waiters behind hd, each in a Provider of its
// own whose reads of the line are counted, and returns them once each
// settled: knocked on the key ahead (bells) or on its lock's watch.
func countingLine(t *testing.T, hd held, n int, bells bool) ([]waiter, []*rangeCounter) {
	t.Helper()
	ws := make([]waiter, n)
	counters := make([]*rangeCounter, n)
	for i := range n {
		var p *Provider
		p, counters[i] = countingProvider(t)
		if bells {
			warmBell(t, p)
		} else {
			noBell(p)
		}
		ws[i] = enqueue(t, hd.ctx, hd.cli, hd.prefix, int64(i+2), fmt.Sprint(i), p.Mutex(hd.name))
		if bells {
			requireKnocked(t, p, 1)
			p.bmu.Lock()
			assert.Nil(t, p.watches[hd.prefix], "waiter %d watches the lock's keys", i)
			p.bmu.Unlock()
		} else {
			requireSettled(t, p, hd.prefix)
		}
	}
	return ws, counters
}

// giveUpLater starts an Acquire of hd's mutex on p and waits until the
// line holds n keys and p has knocks waits that knocked; the func it
// returns has that Acquire give up, and waits for its error.
func giveUpLater(t *testing.T, hd held, p *Provider, n int64, knocks int) func() {
	t.Helper()
	ctx, quit := context.WithCancel(hd.ctx)
	_, errc := locktest.AcquireAsync(ctx, p.Mutex(hd.name))
	requireQueued(t, hd.cli, hd.prefix, n)
	requireKnocked(t, p, knocks)
	return func() {
		quit()
		require.Error(t, <-errc)
	}
}

// anyKey returns one of the keys the Provider holds a door for; b.mu is
// held.
func (b *bells) anyKey() string {
	for k := range b.behind {
		return k
	}
	return ""
}

// noBell keeps p's waits on their lock's watch: its bell is never
// watched.
func noBell(p *Provider) {
	p.bells.mu.Lock()
	defer p.bells.mu.Unlock()
	p.bells.stop = func() {}
}

// loads returns what each counter counted so far.
func loads(counters []*rangeCounter) []int64 {
	n := make([]int64, len(counters))
	for i, c := range counters {
		n[i] = c.n.Load()
	}
	return n
}

// A mutex's waiters in separate Providers, once their bells are watched,
// wait without a watch of the lock's keys: each release rings the Provider
// of the waiter right behind it, which it admits without a read.
func TestBellsHandOver(t *testing.T) {
	hd := holdMutex(t)
	ws, counters := countingLine(t, hd, 5, true)
	before := loads(counters)
	last := hd.h.FencingToken()
	require.NoError(t, hd.h.Release(hd.ctx))
	for i, w := range ws {
		g := locktest.Receive(t, w.got, w.errc)
		assert.Greater(t, g.FencingToken(), last, "waiter %d", i)
		last = g.FencingToken()
		requireWaiting(t, ws[i+1:]...)
		require.NoError(t, g.Release(hd.ctx))
	}
	assert.Equal(t, before, loads(counters), "reads of the waiters")
}

// A knock that arrives once the key it knocks on was released is answered
// at once: the release rang nobody, and the answer admits the waiter.
func TestLateKnockAnswered(t *testing.T) {
	hd := holdMutex(t)
	warmBell(t, hd.holder)
	gate := make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	knocks := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*etcdserverpb.PutRequest); ok && strings.Contains(string(r.Key), bellKind) {
			<-gate
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	wcli := dialWith(t, grpc.WithChainUnaryInterceptor(knocks))
	p := newProviderOn(t, wcli)
	noFallbackReads(p)
	p.follow = time.Hour // only the answer to the knock can admit it
	warmBell(t, p)

	w := enqueue(t, hd.ctx, hd.cli, hd.prefix, 2, "waiter", p.Mutex(hd.name))
	requireKnocked(t, p, 1)
	require.NoError(t, hd.h.Release(hd.ctx)) // while the knock is held back
	requireQueued(t, hd.cli, hd.prefix, 1)
	requireWaiting(t, w)
	open.Do(func() { close(gate) })
	g := locktest.Receive(t, w.got, w.errc)
	assert.Greater(t, g.FencingToken(), hd.h.FencingToken())
	require.NoError(t, g.Release(hd.ctx))
}

// A key that goes without a ring (its Provider's lease was revoked: the
// Provider died, say) still lets the waiter that knocked on it through:
// the waiter watches the key too, from Provider.follow on.
func TestBellSilentDeath(t *testing.T) {
	hd := holdMutex(t)
	p, _ := countingProvider(t)
	warmBell(t, p)
	w := enqueue(t, hd.ctx, hd.cli, hd.prefix, 2, "waiter", p.Mutex(hd.name))
	requireKnocked(t, p, 1)
	hd.holder.lmu.Lock()
	lease := hd.holder.sess.id
	hd.holder.lmu.Unlock()
	_, err := hd.cli.Revoke(hd.ctx, lease)
	require.NoError(t, err)
	g := locktest.Receive(t, w.got, w.errc)
	assert.Greater(t, g.FencingToken(), hd.h.FencingToken())
	require.NoError(t, g.Release(hd.ctx))
}

// A waiter that gives up in the middle of the line tells the waiter right
// behind it, which had no reason to knock on it: that one reads the line
// and knocks on the holder, whose release then rings it.
func TestBellGiveUpInLine(t *testing.T) {
	hd := holdMutex(t)
	quitter, last := newProvider(t), newProvider(t)
	noFallbackReads(last)
	last.follow = time.Hour // only the quitter's ring can send it on
	warmBell(t, quitter)
	warmBell(t, last)
	leave := giveUpLater(t, hd, quitter, 2, 1)
	w := enqueue(t, hd.ctx, hd.cli, hd.prefix, 3, "last", last.Mutex(hd.name))
	requireKnocked(t, last, 1)
	leave()
	requireQueued(t, hd.cli, hd.prefix, 2)
	requireWaiting(t, w)
	require.NoError(t, hd.h.Release(hd.ctx))
	g := locktest.Receive(t, w.got, w.errc)
	require.NoError(t, g.Release(hd.ctx))
}

// A knock answered "moved" (the key's Provider does not hold that key: a
// failed delete left it in line, say) is not sent again while that key
// stays ahead: the wait watches the key instead, and goes on when it goes.
func TestMovedKnockNotRepeated(t *testing.T) {
	hd := holdMutex(t)
	warmBell(t, hd.holder)
	var puts atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*etcdserverpb.PutRequest); ok && strings.Contains(string(r.Key), bellKind) {
			puts.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	wcli := dialWith(t, grpc.WithChainUnaryInterceptor(count))
	p := newProviderOn(t, wcli)
	noFallbackReads(p)
	p.follow = 50 * time.Millisecond
	warmBell(t, p)
	hd.holder.bells.mu.Lock()
	delete(hd.holder.bells.behind, hd.holder.bells.anyKey()) // the holder forgets its key
	hd.holder.bells.mu.Unlock()

	w := enqueue(t, hd.ctx, hd.cli, hd.prefix, 2, "waiter", p.Mutex(hd.name))
	require.Eventually(t, func() bool {
		p.bells.mu.Lock()
		defer p.bells.mu.Unlock()
		for _, c := range p.bells.waits {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.moved != (aheadKey{}) && c.knocked == c.moved && !c.reading && !c.broken
		}
		return false
	}, 10*time.Second, time.Millisecond, "the moved answer and the read after it")
	assert.Equal(t, int64(1), puts.Load(), "knocks sent")
	requireWaiting(t, w)
	require.NoError(t, hd.h.Release(hd.ctx)) // rings nobody
	g := locktest.Receive(t, w.got, w.errc)
	assert.Equal(t, int64(1), puts.Load(), "knocks sent")
	require.NoError(t, g.Release(hd.ctx))
}

// A waiter whose key ahead gave up knocks on the key now ahead of it,
// whatever its place: that key may hold the knock of the one that left
// and so not look for its successor when granted.
func TestBellKnocksAfterGiveUp(t *testing.T) {
	hd := holdMutex(t)
	a, b := newProvider(t), newProvider(t)
	noFallbackReads(b)
	b.follow = time.Hour // only a ring can admit it
	warmBell(t, a)
	warmBell(t, b)
	first := enqueue(t, hd.ctx, hd.cli, hd.prefix, 2, "first", a.Mutex(hd.name))
	leave := giveUpLater(t, hd, a, 3, 2) // knocks on first, within a
	last := enqueue(t, hd.ctx, hd.cli, hd.prefix, 4, "last", b.Mutex(hd.name))
	requireKnocked(t, b, 1)
	leave()
	require.Eventually(t, func() bool { // last read the line again: first is right ahead
		b.bells.mu.Lock()
		defer b.bells.mu.Unlock()
		for _, c := range b.bells.waits {
			c.mu.Lock()
			defer c.mu.Unlock()
			return !c.reading && !c.broken && len(c.ahead) == 2
		}
		return false
	}, 10*time.Second, time.Millisecond, "the read after the give-up")
	require.NoError(t, hd.h.Release(hd.ctx))
	g := locktest.Receive(t, first.got, first.errc)
	requireWaiting(t, last)
	require.NoError(t, g.Release(hd.ctx))
	g = locktest.Receive(t, last.got, last.errc)
	require.NoError(t, g.Release(hd.ctx))
}
