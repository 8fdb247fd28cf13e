package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeadlockVictim makes the server give up a try's statement to break a
// deadlock, and checks that the try reports the lock busy and leaves the
// session and its other grant in service. The cycle: the Provider's
// session holds lock k; session e3 has the fence sequence open and waits
// for k; e2 alters the sequence (a change that keeps its values) and waits
// for e3 to close it; a try on the Provider's session then waits behind
// e2 for the sequence. The server gives up the cheapest waiter, the try's.
func TestDeadlockVictim(t *testing.T) {
	seq := fmt.Sprintf("distlock_deadlock_%08x", rand.Uint32())
	db := newDB(t)
	t.Cleanup(func() {
		_, _ = db.Exec("DROP SEQUENCE IF EXISTS " + seq)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + seq + markSuffix)
	})
	p := newProvider(t, WithFenceSequence(seq), WithMaxConns(2))
	k, n := uniqueName(t, "k"), uniqueName(t, "n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hk, err := p.Mutex(k).TryAcquire(ctx)
	require.NoError(t, err)

	e2, e3 := dbConn(t, db), dbConn(t, db)
	drawn := make(chan error, 1)
	go func() {
		_, err := e3.ExecContext(ctx, fmt.Sprintf("SELECT NEXTVAL(%s), GET_LOCK(?, 60)", seq), LockName(k))
		drawn <- err
	}()
	require.NoError(t, waitState(ctx, db, "User lock", "%"+seq+"%GET_LOCK%"))
	altered := make(chan error, 1)
	go func() {
		_, err := e2.ExecContext(ctx, fmt.Sprintf("ALTER SEQUENCE %s CACHE %d", seq, seqCache))
		altered <- err
	}()
	require.NoError(t, waitState(ctx, db, "Waiting for table metadata lock", "ALTER SEQUENCE%"))

	_, err = p.Mutex(n).TryAcquire(ctx)
	t.Logf("the try the server gave up: %v", err)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, hk.Context().Err(), "the session's other grant was lost")

	require.NoError(t, hk.Release(ctx))
	require.NoError(t, <-drawn)
	require.NoError(t, <-altered)
	_, err = e3.ExecContext(ctx, "DO RELEASE_LOCK(?)", LockName(k))
	require.NoError(t, err)
	h, err := p.Mutex(n).TryAcquire(ctx)
	require.NoError(t, err, "the lock was left held")
	assert.NoError(t, h.Release(ctx))
}

// dbConn returns one session of db, closed when the test ends.
func dbConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitState waits until a session of the server is in state, running a
// statement like info.
func waitState(ctx context.Context, db *sql.DB, state, info string) error {
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE STATE = ? AND INFO LIKE ?`, state, info).Scan(&n)
		if err != nil || n > 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
