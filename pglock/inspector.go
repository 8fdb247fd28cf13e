package pglock

import (
	"context"
	"errors"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
)

var (
	_ core.Inspector = (*locker)(nil)
	_ core.Inspector = (*rwLocker)(nil)
)

// Holder reports who holds the lock, for a Mutex or the write side of an
// RWMutex: the identity the holder's Provider was given (WithIdentity) and
// its fencing token; held is false when no session holds the lock
// exclusively. It is one round trip on the pool that reads pg_locks and the
// lock's fence row, and takes no lock.
//
// Each grant records its holder with its token in the same statement, so
// the answer is the last grant's. While a grant's statement is still
// running (a few microseconds after the server granted the lock) the
// previous holder is reported. Only Providers with WithFenceTable offer
// it: their Mutex and RWMutex lockers implement core.Inspector, the read
// side never does.
func (l *locker) Holder(ctx context.Context) (core.Holder, bool, error) {
	if l.mode == shared || l.p.sql.seq {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, core.ErrUnsupported)
	}
	if err := l.p.ensureFence(ctx); err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, err)
	}
	c, o, sub := l.key.lockTag()
	var h core.Holder
	var token int64
	err := l.p.pool.QueryRow(ctx, l.p.sql.holder(), l.fence, c, o, sub).Scan(&h.ID, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Holder{}, false, nil
	}
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, err)
	}
	h.Token = uint64(token)
	return h, true, nil
}
