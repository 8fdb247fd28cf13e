package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A mutex, a reader-writer lock and a semaphore of the same name are
// distinct locks, each with its own increasing tokens.
func TestPrimitivesDistinct(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "same")
	lockers := map[string]core.Locker{
		"mutex":     p.Mutex(name),
		"rw":        p.RWMutex(name),
		"semaphore": p.Semaphore(name, 1),
	}
	var hs []core.Handle
	for kind, l := range lockers {
		h, err := l.TryAcquire(ctx)
		require.NoError(t, err, kind)
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}

// An explicit key is the lock other clients take with the same numbers.
func TestExplicitKey(t *testing.T) {
	pool := newPool(t)
	p := newProviderOn(t, pool)
	ctx := context.Background()
	k := PairKey(int32(rand.Uint32()), int32(rand.Uint32()))
	k1, k2 := k.Pair()

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1, $2)", k1, k2)
	require.NoError(t, err)

	_, err = p.MutexKey(k).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	_, err = p.Mutex(k.String()).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "the canonical form names the key")
	r, err := p.RWMutexKey(k).RLocker().TryAcquire(ctx)
	require.NoError(t, err, "readers share")
	require.NoError(t, r.Release(ctx))

	_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock_shared($1, $2)", k1, k2)
	require.NoError(t, err)
	h, err := p.MutexKey(k).TryAcquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, k.String(), p.MutexKey(k).Name())
	require.NoError(t, h.Release(ctx))
}

// Tokens increase across every kind of grant of one lock: write, read,
// and transaction-scoped.
func TestFencingAcrossGrants(t *testing.T) {
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprint("sequence=", seq), func(t *testing.T) { testFencingAcrossGrants(t, seq) })
	}
}

func testFencingAcrossGrants(t *testing.T, seq bool) {
	pool := newPool(t)
	opts := []Option{WithFenceTable(DefaultFenceTable)}
	if seq {
		opts = []Option{WithFenceSequence(testFenceSequence)}
	}
	p := newProviderOn(t, pool, opts...)
	ctx := context.Background()
	k := Int64Key(int64(rand.Uint64()))
	rw := p.RWMutexKey(k)
	var last uint64
	next := func(tok uint64, what string) {
		t.Helper()
		require.Greater(t, tok, last, what)
		last = tok
	}
	for i := range 3 {
		w, err := rw.Acquire(ctx)
		require.NoError(t, err)
		next(w.FencingToken(), fmt.Sprint("write ", i))
		require.NoError(t, w.Release(ctx))

		r1, err := rw.RLocker().TryAcquire(ctx)
		require.NoError(t, err)
		next(r1.FencingToken(), "read 1")
		r2, err := rw.RLocker().Acquire(ctx)
		require.NoError(t, err)
		next(r2.FencingToken(), "read 2")
		require.NoError(t, r1.Release(ctx))
		require.NoError(t, r2.Release(ctx))

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		tok, err := p.AcquireTx(ctx, tx, k.String())
		require.NoError(t, err)
		next(tok, "tx")
		require.NoError(t, tx.Rollback(ctx))
	}
}

// A semaphore release in one process wakes the waiters of another through
// NOTIFY.
func TestSemaphoreReleaseNotifies(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t, "sem")
	k, err := KeyOf(name)
	require.NoError(t, err)

	p2.listen()
	<-p2.listenReady
	wake, unsubscribe := p2.sess.Notify.Subscribe("s:" + k.String())
	defer unsubscribe()
	h, err := p1.Semaphore(name, 1).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx))
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("p2 was not notified of p1's release")
	}

	// End to end: with a backoff of a minute, only the notification can
	// hand the slot over before the deadline.
	p2.semBackoff = kit.Backoff{Min: time.Minute, Max: time.Minute}
	h, err = p1.Semaphore(name, 1).TryAcquire(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		h2, err := p2.Semaphore(name, 1).Acquire(ctx)
		if err == nil {
			err = h2.Release(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return p2.sess.Notify.Len() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, h.Release(ctx))
	require.NoError(t, <-got)
}

// TestHolder: the conformance suite checks Holder's answers (Inspector);
// here, the identity is the holder Provider's, and readers are not
// reported as holders.
func TestHolder(t *testing.T) {
	p1 := newProvider(t, WithIdentity("one"), WithFenceTable(DefaultFenceTable))
	p2 := newProvider(t, WithIdentity("two"), WithFenceTable(DefaultFenceTable))
	ctx := context.Background()
	name := uniqueName(t, "rw")
	insp := p2.RWMutex(name).(core.Inspector)
	h, err := p1.RWMutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	who, held, err := insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "one", Token: h.FencingToken()}, who)
	require.NoError(t, h.Release(ctx))

	r, err := p1.RWMutex(name).RLocker().TryAcquire(ctx)
	require.NoError(t, err)
	_, held, err = insp.Holder(ctx)
	require.NoError(t, err)
	require.False(t, held, "readers are not exclusive holders")
	require.NoError(t, r.Release(ctx))

	// Tokens from a sequence (the default) record no holder: the lockers
	// do not offer core.Inspector at all.
	seq := newProvider(t)
	_, ok := seq.Mutex("x").(core.Inspector)
	assert.False(t, ok, "Mutex")
	_, ok = seq.RWMutex("x").(core.Inspector)
	assert.False(t, ok, "RWMutex")
	_, ok = seq.MutexKey(Int64Key(1)).(core.Inspector)
	assert.False(t, ok, "MutexKey")
}

// A fence table made without the holder column (by an earlier version)
// gets it on first use.
func TestFenceTableUpgrade(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	table := fmt.Sprintf("distlock_fence_old_%08x", rand.Uint32())
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, token bigint NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+table) })
	p := newProviderOn(t, pool, WithFenceTable(table), WithIdentity("me"))
	l := p.Mutex(uniqueName(t, "x"))
	h, err := l.TryAcquire(ctx)
	require.NoError(t, err)
	who, held, err := l.(core.Inspector).Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, "me", who.ID)
	require.NoError(t, h.Release(ctx))
}
