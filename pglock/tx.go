package pglock

import (
	"context"

	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
)

// Transaction-scoped locks (pg_advisory_xact_lock) end with the transaction
// that took them, on commit or rollback; there is no handle to release.
// They suit PgBouncer in transaction pooling mode, where session locks
// would stay with a server connection that other clients then use.
//
// Within one transaction they are reentrant, as PostgreSQL makes them.
// They are the same locks as Mutex(name) (exclusive) and the sides of
// RWMutexKey, so session and transaction holders exclude each other.
//
// The fencing token is bumped on the Provider's pool, outside tx, after the
// grant (a second round trip): a counter bumped inside tx would roll back
// with it and hand the same token out again.

// TryAcquireTx tries the exclusive lock of name inside tx without waiting
// and returns its fencing token. A held lock gives an error matching
// core.ErrNotAcquired.
func (p *Provider) TryAcquireTx(ctx context.Context, tx pgx.Tx, name string) (uint64, error) {
	return p.acquireTx(ctx, tx, name, true)
}

// AcquireTx waits inside tx for the exclusive lock of name and returns its
// fencing token. When ctx ends first, pgx cancels the statement, which
// aborts tx; the error then matches core.ErrNotAcquired and ctx.Err().
func (p *Provider) AcquireTx(ctx context.Context, tx pgx.Tx, name string) (uint64, error) {
	return p.acquireTx(ctx, tx, name, false)
}

func (p *Provider) acquireTx(ctx context.Context, tx pgx.Tx, name string, try bool) (uint64, error) {
	k, err := KeyOf(name)
	if err != nil {
		return 0, kit.Wrap(backend, "acquire", name, err)
	}
	if tx == nil {
		return 0, kit.Wrap(backend, "acquire", name, kit.Invalid("nil transaction"))
	}
	if ctx.Err() != nil {
		return 0, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	if err := p.ensureFence(ctx); err != nil {
		return 0, kit.Wrap(backend, "acquire", name, err)
	}
	q, args := xactSQL(k, exclusive, try)
	var ok bool
	if err := tx.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
		if ctx.Err() != nil {
			return 0, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
		}
		return 0, kit.Wrap(backend, "acquire", name, err)
	}
	if !ok {
		return 0, kit.Wrap(backend, "acquire", name, kit.Busy("held by another session"))
	}
	octx, cancel := p.opCtx(ctx)
	defer cancel()
	var token int64
	if err := p.pool.QueryRow(octx, p.sql.bump(), "k:"+k.String(), p.opts.Identity).Scan(&token); err != nil {
		return 0, kit.Wrap(backend, "acquire", name, err)
	}
	return uint64(token), nil
}
