package pglock

import (
	"context"
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

// fenceObject creates, as admin, a fence sequence or table in schema under
// a unique name in the layout a Provider creates, dropped when the test
// ends, and returns the option that names it and the privileges an
// application role needs on it.
func fenceObject(t *testing.T, admin *pgxpool.Pool, schema string, seq bool) (opt Option, grant string) {
	t.Helper()
	name := fmt.Sprintf("%s.distlock_fence_app_%08x", schema, rand.Uint32())
	create, drop := `CREATE TABLE `+name+` (key text PRIMARY KEY, token bigint NOT NULL, holder text)`, `DROP TABLE `+name
	opt, grant = WithFenceTable(name), `SELECT, INSERT, UPDATE ON `+name
	if seq {
		create, drop = `CREATE SEQUENCE `+name, `DROP SEQUENCE `+name
		opt, grant = WithFenceSequence(name), `USAGE ON SEQUENCE `+name
	}
	_, err := admin.Exec(context.Background(), create)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), drop)
		require.NoError(t, err)
	})
	return opt, grant
}

// An application role that only uses the fence sequence or table, with no
// CREATE on the schema, takes and releases mutexes, reader-writer locks,
// semaphores and transaction-scoped locks, with increasing tokens.
func TestFenceLeastPrivilege(t *testing.T) {
	for _, seq := range []bool{true, false} {
		t.Run(fmt.Sprint("sequence=", seq), func(t *testing.T) {
			admin := newPool(t)
			schema := appSchema(t, admin)
			opt, grant := fenceObject(t, admin, schema, seq)
			pool := newGrantedRole(t, admin, schema, grant)
			testFenceLeastPrivilege(t, pool, newProviderOn(t, pool, opt, WithIdentity("app-1")), newProviderOn(t, pool, opt))
		})
	}
}

func testFenceLeastPrivilege(t *testing.T, pool *pgxpool.Pool, p1, p2 *Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t, "x")

	// The first calls of each Provider race for its setup.
	var wg sync.WaitGroup
	for _, p := range []*Provider{p1, p2} {
		for i := range 4 {
			wg.Go(func() {
				h, err := p.Mutex(uniqueName(t, fmt.Sprint("first-", i))).TryAcquire(ctx)
				if assert.NoError(t, err) {
					assert.NotZero(t, h.FencingToken())
					assert.NoError(t, h.Release(ctx))
				}
			})
		}
	}
	wg.Wait()

	var last uint64
	next := func(h core.Handle, err error) core.Handle {
		t.Helper()
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		return h
	}

	m1 := p1.Mutex(name)
	h := next(m1.TryAcquire(ctx))
	_, err := p2.Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	if in, ok := m1.(core.Inspector); ok {
		who, held, err := in.Holder(ctx)
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, core.Holder{ID: "app-1", Token: last}, who)
	}
	// A waiter in the server's queue gets the lock on release.
	got := make(chan core.Handle, 1)
	go func() {
		h, err := p2.Mutex(name).Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, h.Release(ctx))
	h = next(<-got, nil)
	require.NoError(t, h.Release(ctx))
	h = next(m1.Acquire(ctx))
	require.NoError(t, h.Release(ctx))

	k, err := KeyOf(name)
	require.NoError(t, err)
	rw := p1.RWMutexKey(k) // the mutex's lock, so its counter too
	h = next(rw.Acquire(ctx))
	require.NoError(t, h.Release(ctx))
	r := next(rw.RLocker().TryAcquire(ctx))
	r2 := next(p2.RWMutexKey(k).RLocker().Acquire(ctx))
	require.NoError(t, r.Release(ctx))
	require.NoError(t, r2.Release(ctx))

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	tok, err := p2.TryAcquireTx(ctx, tx, name)
	require.NoError(t, err)
	require.Greater(t, tok, last, "tx")
	require.NoError(t, tx.Rollback(ctx))

	// A semaphore has a counter of its own; a waiter wakes on a release.
	last = 0
	sem := uniqueName(t, "sem")
	s1 := next(p1.Semaphore(sem, 2).TryAcquire(ctx))
	s2 := next(p2.Semaphore(sem, 2).Acquire(ctx))
	_, err = p1.Semaphore(sem, 2).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	go func() {
		h, err := p1.Semaphore(sem, 2).Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, s1.Release(ctx))
	s3 := next(<-got, nil)
	require.NoError(t, s2.Release(ctx))
	require.NoError(t, s3.Release(ctx))
}

// An application role without CREATE on the schema whose fence sequence or
// table is missing gets the server's error from every acquire, naming the
// fence, and creates nothing.
func TestFenceLeastPrivilegeMissing(t *testing.T) {
	for _, seq := range []bool{true, false} {
		t.Run(fmt.Sprint("sequence=", seq), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			admin := newPool(t)
			schema := appSchema(t, admin)
			name := fmt.Sprintf("%s.distlock_fence_absent_%08x", schema, rand.Uint32())
			opt := WithFenceTable(name)
			if seq {
				opt = WithFenceSequence(name)
			}
			p := newProviderOn(t, newGrantedRole(t, admin, schema), opt)
			for _, l := range []core.Locker{p.Mutex(uniqueName(t, "m")), p.RWMutex(uniqueName(t, "rw")).RLocker(), p.Semaphore(uniqueName(t, "s"), 2)} {
				for _, acquire := range []func(context.Context) (core.Handle, error){l.TryAcquire, l.Acquire} {
					_, err := acquire(ctx)
					require.ErrorContains(t, err, "permission denied for schema "+schema)
					require.ErrorContains(t, err, name)
					require.NotErrorIs(t, err, core.ErrNotAcquired)
					var named *core.Error
					require.ErrorAs(t, err, &named)
					require.Equal(t, "acquire", named.Op)
				}
			}
			var exists bool
			require.NoError(t, admin.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists))
			require.False(t, exists)
		})
	}
}

// Providers that find the fence missing at once all create it, one of
// them for real, and all acquire.
func TestFenceCreateRace(t *testing.T) {
	for _, seq := range []bool{true, false} {
		t.Run(fmt.Sprint("sequence=", seq), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })
			name := fmt.Sprintf("distlock_fence_race_%08x", rand.Uint32())
			opt, drop := WithFenceTable(name), `DROP TABLE IF EXISTS `+name
			if seq {
				opt, drop = WithFenceSequence(name), `DROP SEQUENCE IF EXISTS `+name
			}
			t.Cleanup(func() {
				_, err := pool.Exec(context.Background(), drop)
				require.NoError(t, err)
			})
			var wg sync.WaitGroup
			for i := range 8 {
				p := newProviderOn(t, pool, opt)
				wg.Go(func() {
					h, err := p.Mutex(uniqueName(t, fmt.Sprint(i))).TryAcquire(ctx)
					if assert.NoError(t, err) {
						assert.NoError(t, h.Release(ctx))
					}
				})
			}
			wg.Wait()
		})
	}
}
