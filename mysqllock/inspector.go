package mysqllock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

var _ core.Inspector = (*locker)(nil)

// Holder reports who holds the Mutex: the identity the holder's Provider
// was given (WithIdentity) and its fencing token; held is false when no
// session holds the lock. It is one round trip on the pool that reads the
// lock's counter row where IS_USED_LOCK names the session that wrote it,
// and takes no lock.
//
// Each grant records its identity and connection id with its token in the
// same statement, so the answer is the last grant's. While a grant's
// statement is still running (a few microseconds after the server granted
// the lock) the lock reads as free. Only Providers with WithFenceTable
// offer it: their Mutex lockers implement core.Inspector.
func (l *locker) Holder(ctx context.Context) (core.Holder, bool, error) {
	if l.p.sql.seq {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, core.ErrUnsupported)
	}
	if err := l.p.ensureFence(ctx); err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, err)
	}
	var h core.Holder
	err := l.p.db.QueryRowContext(ctx, l.p.sql.holder(), l.lock, l.lock).Scan(&h.ID, &h.Token)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Holder{}, false, nil
	}
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.name, err)
	}
	return h, true, nil
}
