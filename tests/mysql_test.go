package tests

import (
	"database/sql"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// MySQL (MariaDB) in the cross-backend tests: a row of electionBackends,
// of TestElectionStoreOutage (the server killed and restarted, as for
// PostgreSQL) and of TestPollLeaseBackends. A lock lives with its session, so a killed
// leader's lock frees as soon as the server sees the connection close.

// mysqlProvider returns a Provider with a short keepalive on a *sql.DB of
// its own, for dsn. Holder rows (WithFenceTable) let followers name the
// leader and give polllease its strict check and snapshot.
func mysqlProvider(t testing.TB, dsn string) (*mysqllock.Provider, func()) {
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	p, err := mysqllock.New(db, mysqllock.WithKeepalive(500*time.Millisecond), mysqllock.WithFenceTable(mysqllock.DefaultFenceTable))
	require.NoError(t, err)
	return p, func() {
		_ = p.Close()
		_ = db.Close()
	}
}

func mysqlElectionLocker(t testing.TB, name string) core.Locker {
	return mysqlLockerAt(t, locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN"), name)
}

func mysqlLockerAt(t testing.TB, dsn, name string) core.Locker {
	p, closeP := mysqlProvider(t, dsn)
	t.Cleanup(closeP)
	return p.Mutex(name)
}

// plMySQLBackend opens the Providers of TestPollLeaseBackends' mysql row.
func plMySQLBackend(t *testing.T) func(testing.TB) (core.Provider, core.Membership, func()) {
	dsn := locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN")
	return func(t testing.TB) (core.Provider, core.Membership, func()) {
		p, closeP := mysqlProvider(t, dsn)
		return p, p, closeP
	}
}
