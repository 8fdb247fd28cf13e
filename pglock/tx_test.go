package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transaction-scoped locks end with the transaction, on commit and on
// rollback, and exclude session holders of the same name meanwhile.
func TestTxScoped(t *testing.T) {
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			pool := newPool(t)
			p := newProviderOn(t, pool)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := uniqueName(t, "tx")

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			tok, err := p.AcquireTx(ctx, tx, name)
			require.NoError(t, err)
			require.NotZero(t, tok)

			_, err = p.Mutex(name).TryAcquire(ctx)
			require.ErrorIs(t, err, core.ErrNotAcquired, "a session lock while the tx holds it")
			tx2, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = p.TryAcquireTx(ctx, tx2, name)
			require.ErrorIs(t, err, core.ErrNotAcquired, "another tx while the tx holds it")
			require.NoError(t, tx2.Rollback(ctx))

			if end == "commit" {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			h, err := p.Mutex(name).TryAcquire(ctx)
			require.NoError(t, err, "free after %s", end)
			assert.Greater(t, h.FencingToken(), tok, "tokens keep increasing after a %s", end)
			require.NoError(t, h.Release(ctx))
		})
	}
}

// A waiting AcquireTx ends with ctx.
func TestTxScopedCancel(t *testing.T) {
	pool := newPool(t)
	p := newProviderOn(t, pool)
	ctx := context.Background()
	name := uniqueName(t, "tx")
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	defer h.Release(ctx)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = p.AcquireTx(wctx, tx, name)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
