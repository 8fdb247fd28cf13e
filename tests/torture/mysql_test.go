package torture

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/mysqllock"
	"github.com/distlock/distlock/tests/internal/launch"
)

// MySQL (MariaDB): a lock lives with its session. A paused worker keeps
// its session and so its lock; a killed worker's session ends with its
// connections; a KILL of the holder's session and a server crash take the
// lock from a holder that goes on, whose write the fencing check must
// refuse: the sequence's tokens go on increasing across the restart.
func TestTortureMySQL(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	srv := launch.MySQL(t)
	b := backend{kind: "mysql", addr: srv.Addr(), noRWMutex: true}
	kill := fault{name: "KILL of the holder's session", overlaps: true, stale: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		db, err := sql.Open("mysql", srv.Addr())
		require.NoError(t, err)
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lock := mysqllock.LockName(r.lock)
		if r.b.lock == "semaphore" {
			lock = mysqllock.SlotName(r.lock, 0) // a semaphore of 1
		}
		var id sql.NullInt64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lock).Scan(&id))
		require.True(t, id.Valid, "nobody holds the lock")
		_, err = db.ExecContext(ctx, fmt.Sprintf("KILL %d", id.Int64))
		require.NoError(t, err)
		r.progress(3, sizes().within, "after the KILL")
		r.release(0)
	}}
	torture(t, b, []fault{
		workerPause(false),
		workerKill,
		kill,
		serverRestart(srv),
	})
}

// openMySQL opens a worker's Provider on the DSN addr.
func openMySQL(addr string) (*opened, error) {
	db, err := sql.Open("mysql", addr+"?timeout=2s")
	if err != nil {
		return nil, err
	}
	p, err := mysqllock.New(db, mysqllock.WithTimeout(5*time.Second))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &opened{p: p, close: func() { _ = p.Close(); _ = db.Close() }}, nil
}
