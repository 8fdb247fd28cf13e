package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redlock"
)

// TestWaiterWaitsForItsTurn: a mutex waiter whose first try found the lock
// held does not try again until its turn is announced, where its
// Provider's subscriptions ran from before that try; where they were not
// running yet, it tries again at once after subscribing, since a release
// in between may have gone unheard. Either way the release's announcement
// grants it the lock.
func TestWaiterWaitsForItsTurn(t *testing.T) {
	clients := sharedClients(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, listening := range []bool{true, false} {
		t.Run(fmt.Sprint("listening=", listening), func(t *testing.T) {
			holder, p := newProvider(t, clients), newProvider(t, clients)
			name := uniqueName(t)
			h, err := holder.Mutex(name).TryAcquire(ctx)
			require.NoError(t, err)
			got := waitFor(t, ctx, holder, p, name, listening)
			require.NoError(t, h.Release(ctx))
			select {
			case h = <-got:
				require.NotNil(t, h)
				require.NoError(t, h.Release(ctx))
			case <-ctx.Done():
				t.Fatal("the waiter was not granted the lock")
			}
		})
	}
}

// keepListening has a waiter of p wait, until the test ends, for a lock
// that holder holds, and returns once p's subscriptions run.
func keepListening(t *testing.T, ctx context.Context, holder, p *redlock.Provider) {
	t.Helper()
	name := uniqueName(t) + "/other"
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if h, err := p.Mutex(name).Acquire(wctx); err == nil {
			_ = h.Release(context.Background())
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		_ = h.Release(context.Background())
	})
	require.Eventually(t, func() bool { return redlock.Listening(p) }, 10*time.Second, time.Millisecond)
}

// TestReleaseHandsOverToTheFirstWaiter: a release hands the lock, on every
// server, to the first waiter in line, which holds it from the servers'
// announcements alone, with a token above the one before; nobody else
// gets it meanwhile.
func TestReleaseHandsOverToTheFirstWaiter(t *testing.T) {
	clients := sharedClients(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := startHandover(t, ctx, clients)
	name, handedOver, h, keys, got := hc.name, hc.handedOver, hc.h, hc.keys, hc.got
	require.NoError(t, h.Release(ctx))
	var next core.Handle
	select {
	case next = <-got:
		require.NotNil(t, next)
	case <-ctx.Done():
		t.Fatal("the waiter was not handed the lock")
	}
	select {
	case n := <-handedOver:
		require.Equal(t, name, n)
	default:
		t.Fatal("the waiter did not hold the lock from the servers' handovers")
	}
	assert.Greater(t, next.FencingToken(), h.FencingToken())
	owner := redlock.GrantOf(next).Owner + ":"
	held := 0
	for _, rdb := range clients {
		if v := rdb.Get(ctx, keys.lock).Val(); strings.HasPrefix(v, owner) {
			held++
		}
	}
	assert.GreaterOrEqual(t, held, 2, "the heir's grant on a majority")
	_, err := newProvider(t, clients).Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, next.Release(ctx))
	other, err := newProvider(t, clients).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, other.Release(ctx))
}

// TestHandoverByAMinority: when only a minority hands the lock to the
// first waiter (here the others hand it to a waiter ahead of it whose
// grant lapses at once), the waiter tries every server itself, claims the
// handover made to it and holds the lock.
func TestHandoverByAMinority(t *testing.T) {
	clients := sharedClients(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := startHandover(t, ctx, clients)
	handedOver, h, keys, got := hc.handedOver, hc.h, hc.keys, hc.got
	// A waiter ahead on two servers, whose handover lives 1 ms, lined up
	// at once (a try drops a half-written entry).
	q := strings.TrimSuffix(keys.lock, "mutex") + "mutex:q"
	for _, rdb := range clients[1:] {
		_, err := rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
			tx.ZAdd(ctx, q, redis.Z{Score: 1, Member: "ghost"})
			tx.ZAdd(ctx, q+"x", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "ghost"})
			tx.HSet(ctx, q+"t", "ghost", "1 nowhere")
			return nil
		})
		require.NoError(t, err)
	}
	require.NoError(t, h.Release(ctx))
	select {
	case next := <-got:
		require.NotNil(t, next)
		assert.Greater(t, next.FencingToken(), h.FencingToken())
		require.NoError(t, next.Release(ctx))
	case <-ctx.Done():
		t.Fatal("the waiter did not get the lock")
	}
	select {
	case n := <-handedOver:
		t.Fatalf("held from the handovers of a minority (%s)", n)
	default:
	}
}

// waitFor starts an Acquire of name by p and returns once it waits: with
// listening, p's subscriptions run before it tries (see keepListening),
// and it waits for its turn without trying again; without, it tries again
// at once after subscribing. The channel receives its handle.
func waitFor(t *testing.T, ctx context.Context, holder, p *redlock.Provider, name string, listening bool) <-chan core.Handle {
	t.Helper()
	if listening {
		// A waiter of p for another lock held elsewhere keeps p's
		// subscriptions running.
		keepListening(t, ctx, holder, p)
	}
	skips := make(chan bool, 1)
	restore := redlock.OnWait(func(n string, skip bool) {
		if n == name {
			skips <- skip
		}
	})
	defer restore()
	got := make(chan core.Handle, 1)
	go func() {
		h, err := p.Mutex(name).Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	select {
	case skip := <-skips:
		require.Equal(t, listening, skip, "skipped the try after subscribing")
	case <-ctx.Done():
		t.Fatal("the waiter did not wait")
	}
	return got
}

// handoverCase is a lock held by h, with a waiter of another Provider
// waiting for its turn (waitFor) whose handle got receives, and the lock
// names sent to handedOver each time a waiter holds it from handovers.
type handoverCase struct {
	name       string
	handedOver chan string
	h          core.Handle
	keys       lockKeys
	got        <-chan core.Handle
}

func startHandover(t *testing.T, ctx context.Context, clients []redis.UniversalClient) handoverCase {
	t.Helper()
	hc := handoverCase{name: uniqueName(t), handedOver: make(chan string, 4)}
	restore := redlock.OnHandover(func(n string) { hc.handedOver <- n })
	t.Cleanup(restore)
	holder := newProvider(t, clients)
	var err error
	hc.h, err = holder.Mutex(hc.name).TryAcquire(ctx)
	require.NoError(t, err)
	hc.keys = grantKeys(t, clients, hc.h)
	hc.got = waitFor(t, ctx, holder, newProvider(t, clients), hc.name, true)
	return hc
}
