package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// unlockIfHeld finds the lock in pg_locks (the classid/objid/objsubid
// mapping must match the server's for both key spaces and any sign) and
// releases it only when this session holds it in that mode.
func TestUnlockIfHeld(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	other, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer other.Release()
	s := statements{fence: quoteIdent(DefaultFenceTable)}

	for _, k := range []Key{Int64Key(0x7fffffff_00000001), Int64Key(-0x12345678), PairKey(-1, 1<<31-1), PairKey(5, -7)} {
		for _, m := range []lockMode{exclusive, shared} {
			t.Run(fmt.Sprintf("%v/%v", k, m), func(t *testing.T) {
				q, args := s.unlockIfHeld(k, m)
				var was bool
				require.NoError(t, conn.QueryRow(ctx, q, args...).Scan(&was))
				require.False(t, was, "not held yet")

				call, largs := keyArgs(k)
				_, err := conn.Exec(ctx, "SELECT pg_advisory_lock"+m.suffix()+call, largs...)
				require.NoError(t, err)
				require.NoError(t, other.QueryRow(ctx, q, args...).Scan(&was))
				require.False(t, was, "held by another session")

				require.NoError(t, conn.QueryRow(ctx, q, args...).Scan(&was))
				require.True(t, was, "held")
				var free bool
				require.NoError(t, other.QueryRow(ctx, "SELECT pg_try_advisory_lock"+call, largs...).Scan(&free))
				require.True(t, free, "released")
				_, err = other.Exec(ctx, "SELECT pg_advisory_unlock"+call, largs...)
				require.NoError(t, err)
			})
		}
	}
}

func TestUnlockSlotsIfHeld(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	keys := []int64{-0x7fffffff_ffffffff, -2, 7, 0x7fffffff_00000001}
	for _, k := range keys[1:3] {
		_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1::int8)", k)
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, conn.QueryRow(ctx, unlockSlotsIfHeldSQL, keys).Scan(&n))
	require.Equal(t, 2, n)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&n))
	require.Zero(t, n)
}

// When the fence upsert fails after the server granted the lock, the lock
// is released before the error returns (try, blocking wait and semaphore).
func TestFailedUpsertLeavesNoLock(t *testing.T) {
	pool := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := fmt.Sprintf("distlock_fence_fail_%08x", rand.Uint32())
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, token bigint NOT NULL CHECK (token < 2))`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+table) })
	bad := newProviderOn(t, pool, WithFenceTable(table))
	good := newProvider(t)

	for _, tc := range []struct {
		name string
		make func(p *Provider, name string) core.Locker
	}{
		{"mutex", func(p *Provider, n string) core.Locker { return p.Mutex(n) }},
		{"semaphore", func(p *Provider, n string) core.Locker { return p.Semaphore(n, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName(t, "x")
			h, err := tc.make(bad, name).TryAcquire(ctx) // token 1
			require.NoError(t, err)
			require.NoError(t, h.Release(ctx))

			_, err = tc.make(bad, name).TryAcquire(ctx) // token 2 violates the check
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "23514", pgErr.Code)
			h, err = tc.make(good, name).TryAcquire(ctx)
			require.NoError(t, err, "the failed try left the lock held")
			require.NoError(t, h.Release(ctx))

			if tc.name == "mutex" {
				// The same through a blocking wait.
				h, err := good.Mutex(name).TryAcquire(ctx)
				require.NoError(t, err)
				errc := make(chan error, 1)
				go func() { _, err := bad.Mutex(name).Acquire(ctx); errc <- err }()
				require.Eventually(t, func() bool { return waitingOn(pool, name) }, 10*time.Second, 5*time.Millisecond)
				require.NoError(t, h.Release(ctx))
				require.ErrorAs(t, <-errc, &pgErr)
				h, err = good.Mutex(name).TryAcquire(ctx)
				require.NoError(t, err, "the failed wait left the lock held")
				require.NoError(t, h.Release(ctx))
			}
		})
	}
}
