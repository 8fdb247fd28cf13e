package pglock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 1,000 random acquire/release operations over 20 names, from several
// goroutines, through a pool of size 1 and the fewest connections the
// Provider allows: nothing deadlocks, no name is ever held twice.
func TestMultiplexRandomOps(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	p := newProviderOn(t, pool, WithMaxConns(2))
	names := make([]string, 20)
	for i := range names {
		names[i] = uniqueName(t, fmt.Sprint(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const workers, opsPerWorker = 5, 200
	var mu sync.Mutex
	holder := map[string]int{} // name → worker holding it
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []core.Handle
			var heldNames []string
			release := func(i int) error {
				mu.Lock()
				delete(holder, heldNames[i])
				mu.Unlock()
				err := held[i].Release(ctx)
				held = append(held[:i], held[i+1:]...)
				heldNames = append(heldNames[:i], heldNames[i+1:]...)
				return err
			}
			for range opsPerWorker {
				if len(held) > 0 && (len(held) >= 3 || rand.IntN(2) == 0) {
					if err := release(rand.IntN(len(held))); err != nil {
						errs <- err
						return
					}
					continue
				}
				name := names[rand.IntN(len(names))]
				l := p.Mutex(name)
				var h core.Handle
				var err error
				if rand.IntN(2) == 0 {
					h, err = l.TryAcquire(ctx)
				} else {
					// A short wait, so that workers waiting on each other's
					// names give up instead of deadlocking.
					wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
					h, err = l.Acquire(wctx)
					wcancel()
				}
				if errors.Is(err, core.ErrNotAcquired) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if other, ok := holder[name]; ok {
					mu.Unlock()
					errs <- fmt.Errorf("worker %d got %s held by worker %d", w, name, other)
					return
				}
				holder[name] = w
				mu.Unlock()
				held = append(held, h)
				heldNames = append(heldNames, name)
			}
			for len(held) > 0 {
				if err := release(0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.LessOrEqual(t, len(p.sess.Conns()), 2)
}

// 10,000 locks held at once by one Provider use at most 8 server
// connections, counted in pg_stat_activity by application_name.
func TestMultiplexManyLocks(t *testing.T) {
	app := fmt.Sprintf("pglock-many-%08x", rand.Uint32())
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
	p := newProviderOn(t, pool)
	ctx := context.Background()
	prefix := uniqueName(t, "")
	const n = 10000
	handles := make([]core.Handle, 0, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				l := p.Mutex(fmt.Sprint(prefix, i))
				var h core.Handle
				var err error
				if i%2 == 0 {
					h, err = l.TryAcquire(ctx)
				} else {
					h, err = l.Acquire(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				handles = append(handles, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, handles, n)

	var conns, locks int
	require.NoError(t, newPool(t).QueryRow(ctx,
		`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&conns))
	require.NoError(t, newPool(t).QueryRow(ctx,
		`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		 WHERE l.locktype = 'advisory' AND a.application_name = $1`, app).Scan(&locks))
	t.Logf("%d locks held on %d connections", locks, conns)
	assert.LessOrEqual(t, conns, 8)
	assert.Equal(t, n, locks)
	for _, h := range handles {
		require.NoError(t, h.Release(ctx))
		require.ErrorIs(t, context.Cause(h.Context()), core.ErrReleased)
	}
}

// A blocking wait runs on a connection of its own: releasing other locks
// of the same Provider does not queue behind it.
func TestReleaseDoesNotQueueBehindWait(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	busy := uniqueName(t, "busy")
	other := uniqueName(t, "other")

	hb, err := p2.Mutex(busy).TryAcquire(ctx)
	require.NoError(t, err)
	defer hb.Release(ctx)
	ho, err := p1.Mutex(other).TryAcquire(ctx)
	require.NoError(t, err)

	waitCtx, stopWait := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := p1.Mutex(busy).Acquire(waitCtx)
		waited <- err
	}()
	// Once p1 is waiting on the server, releasing and re-taking other
	// completes while the wait goes on.
	pool := newPool(t)
	require.Eventually(t, func() bool { return waitingOn(pool, busy) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, ho.Release(ctx))
	ho, err = p1.Mutex(other).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, ho.Release(ctx))
	select {
	case err := <-waited:
		t.Fatalf("the wait ended early: %v", err)
	default:
	}
	stopWait()
	require.ErrorIs(t, <-waited, core.ErrNotAcquired)
}

// waitingOn reports whether some session waits for the mutex of name.
func waitingOn(pool *pgxpool.Pool, name string) bool {
	k, err := KeyOf(name)
	if err != nil {
		return false
	}
	c, o, sub := k.lockTag()
	var n int
	err = pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		 AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = $3`, c, o, sub).Scan(&n)
	return err == nil && n > 0
}

// A wait that ends by lock_timeout (short deadline) or by a cancel request
// (cancelled context, long deadline) leaves its connection usable: repeated
// waits do not open new connections, and nothing stays locked.
func TestEndedWaitsReuseConnection(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	h, err := p2.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	pool := newPool(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 6 {
		var wctx context.Context
		var cancel context.CancelFunc
		if i%2 == 0 {
			wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		} else {
			wctx, cancel = context.WithTimeout(ctx, time.Minute)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Cancel once p1 waits on the server (or the wait ended).
				for wctx.Err() == nil && !waitingOn(pool, name) {
				}
				cancel()
			}()
		}
		_, err := p1.Mutex(name).Acquire(wctx)
		cancel()
		require.ErrorIs(t, err, core.ErrNotAcquired)
	}
	n := len(p1.sess.Conns())
	assert.LessOrEqual(t, n, 2)
	require.NoError(t, h.Release(ctx))
	h, err = p1.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx))
}

// With every connection but one taken by blocking waits, try-locks still
// run at once; readers of one name beyond the connection limit are told
// busy instead of queueing.
func TestConnectionLimit(t *testing.T) {
	p, other := newProvider(t, WithMaxConns(3)), newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := newPool(t)

	var busy []string
	for i := range 2 {
		name := uniqueName(t, fmt.Sprint("busy", i))
		h, err := other.Mutex(name).TryAcquire(ctx)
		require.NoError(t, err)
		defer h.Release(ctx)
		busy = append(busy, name)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range busy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Mutex(name).Acquire(wctx)
			assert.ErrorIs(t, err, core.ErrNotAcquired)
		}()
		require.Eventually(t, func() bool { return waitingOn(pool, name) }, 10*time.Second, 5*time.Millisecond)
	}

	rw := p.RWMutex(uniqueName(t, "rw")).RLocker()
	r1, err := rw.TryAcquire(ctx)
	require.NoError(t, err, "a try-lock while two waits hold two of three connections")
	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a second reader needs a connection not holding the name")
	require.NoError(t, r1.Release(ctx))

	stop()
	wg.Wait()
}
