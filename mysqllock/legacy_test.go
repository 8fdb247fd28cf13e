package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// oldMembersTable creates a members table in the layout of the version
// before values (no value column), dropped when the test ends, and returns
// its name.
func oldMembersTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	table := fmt.Sprintf("distlock_members_legacy_%08x", rand.Uint32())
	_, err := db.ExecContext(context.Background(), `CREATE TABLE `+table+` (grp VARBINARY(255), id VARBINARY(255),
expires_at DATETIME(6) NOT NULL, PRIMARY KEY (grp, id)) ENGINE=InnoDB`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+table) })
	return table
}

// appUserDB creates a user that may only read and write tables (SELECT,
// INSERT, UPDATE, DELETE: no CREATE, no ALTER), dropped when the test
// ends, and returns a *sql.DB logged in as it. Register its Providers after
// calling it, so that they close before the user is dropped.
func appUserDB(t *testing.T, db *sql.DB, tables ...string) *sql.DB {
	t.Helper()
	ctx := context.Background()
	user := fmt.Sprintf("dl_app_%08x", rand.Uint32())
	_, err := db.ExecContext(ctx, `CREATE USER '`+user+`'@'127.0.0.1'`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP USER '`+user+`'@'127.0.0.1'`) })
	for _, table := range tables {
		_, err = db.ExecContext(ctx, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+table+` TO '`+user+`'@'127.0.0.1'`)
		require.NoError(t, err, "the test user needs GRANT OPTION (scripts/services.sh)")
	}
	cfg, err := mysql.ParseDSN(locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN"))
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, ""
	app, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Close() })
	return app
}

// TestLegacyMembersTableWithoutAlter: a members table of an earlier
// version that the Provider's user may not alter (nor create) is used
// without values: Register, Heartbeat, Members and Deregister work,
// Announce fails with core.ErrUnsupported and writes nothing, the table is
// left alone, and one warning names the statement that adds the column. A
// Provider opened after the column is added announces.
func TestLegacyMembersTableWithoutAlter(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	table := oldMembersTable(t, db)
	app := appUserDB(t, db, table)
	var logged locktest.LogBuffer
	p := newProviderOn(t, app, WithMembersTable(table), WithLogger(logged.Logger()))
	g := uniqueName(t, "g")
	_, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (?, 'old', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`, g)
	require.NoError(t, err)

	got, err := p.Members(ctx, g)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, got)
	require.NoError(t, p.Register(ctx, g, "a", time.Minute))
	got, err = core.Heartbeat(ctx, p, g, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "old"}, got)
	_, err = p.Announce(ctx, g, "c", time.Minute, []byte("v"))
	require.ErrorIs(t, err, core.ErrUnsupported)
	alter := "ALTER TABLE `" + table + "` ADD COLUMN value MEDIUMBLOB"
	require.ErrorContains(t, err, alter)
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "announce", ce.Op)
	_, err = p.Announce(ctx, g, "c", time.Minute, nil)
	require.ErrorIs(t, err, core.ErrUnsupported, "an empty value too")
	require.NoError(t, p.Deregister(ctx, g, "a"))
	got, err = p.Members(ctx, g)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "old"}, got, "c not registered, a deregistered")

	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'value'`, table).Scan(&n))
	require.Zero(t, n, "the table keeps its layout")
	log := logged.String()
	require.Equal(t, 1, strings.Count(log, "level=WARN"), log)
	require.Contains(t, log, "table="+table)
	require.Contains(t, log, alter)

	_, err = db.ExecContext(ctx, alter)
	require.NoError(t, err)
	ms, err := newProviderOn(t, app, WithMembersTable(table)).Announce(ctx, g, "c", time.Minute, []byte("v"))
	require.NoError(t, err, "a Provider opened after the column was added")
	require.Equal(t, []core.Member{{ID: "b", Value: nil}, {ID: "c", Value: []byte("v")}, {ID: "old", Value: nil}}, ms)
	_, err = p.Announce(ctx, g, "c", time.Minute, []byte("v"))
	require.ErrorIs(t, err, core.ErrUnsupported, "a Provider keeps the layout it found")
	require.NoError(t, p.Register(ctx, g, "b", time.Minute))
}

// TestLegacyMembersTablePurgeAndClose: without the value column a
// registration still purges its group's long-expired rows, and after Close
// every membership call, Announce too, fails with the closed error.
func TestLegacyMembersTablePurgeAndClose(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	table := oldMembersTable(t, db)
	p := newProviderOn(t, appUserDB(t, db, table), WithMembersTable(table))
	g := uniqueName(t, "g")
	_, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (?, 'dead', UTC_TIMESTAMP(6) - INTERVAL 2 HOUR)`, g)
	require.NoError(t, err)
	require.NoError(t, p.Register(ctx, g, "live", time.Minute)) // the Provider's first purge runs at once
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE grp = ?`, g).Scan(&n))
	require.Equal(t, 1, n, "the long-expired row purged, the live one kept")

	require.NoError(t, p.Close())
	_, err = p.Members(ctx, g)
	require.ErrorIs(t, err, errClosed)
	_, err = p.Announce(ctx, g, "live", time.Minute, nil)
	require.ErrorIs(t, err, errClosed)
	require.ErrorIs(t, p.Deregister(ctx, g, "live"), errClosed)
	require.ErrorIs(t, p.Register(ctx, g, "live", time.Minute), errClosed)
}

// TestFenceWithoutCreate: a user that may only read and write an existing
// fence table, or sequence and mark table (no CREATE privilege), takes
// locks, with tokens that increase.
func TestFenceWithoutCreate(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		db := newDB(t)
		table := fmt.Sprintf("distlock_fence_app_%08x", rand.Uint32())
		makeObjects(t, db, []string{table}, `CREATE TABLE `+table+` (name VARBINARY(64) PRIMARY KEY,
token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB`)
		twoGrants(t, newProviderOn(t, appUserDB(t, db, table), WithFenceTable(table)))
	})
	t.Run("sequence", func(t *testing.T) {
		db := newDB(t)
		seq := fmt.Sprintf("distlock_fence_app_%08x", rand.Uint32())
		mark := seq + markSuffix
		makeObjects(t, db, []string{seq, mark},
			`CREATE SEQUENCE `+seq+` INCREMENT BY 1 CACHE 1000`,
			`CREATE TABLE `+mark+` (id TINYINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
			`INSERT INTO `+mark+` (id, n) VALUES (1, 0)`)
		twoGrants(t, newProviderOn(t, appUserDB(t, db, seq, mark), WithFenceSequence(seq)))
	})
}

// makeObjects runs the statements that make objects, dropped (as tables,
// which MariaDB's sequences are) when the test ends.
func makeObjects(t *testing.T, db *sql.DB, objects []string, stmts ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, o := range objects {
			_, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+o)
		}
	})
	for _, q := range stmts {
		_, err := db.ExecContext(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// twoGrants takes a mutex of p twice and checks that the second token is
// larger.
func twoGrants(t *testing.T, p *Provider) {
	t.Helper()
	ctx := context.Background()
	m := p.Mutex(uniqueName(t, "m"))

	h, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	first := h.FencingToken()
	require.NoError(t, h.Release(ctx))
	h, err = m.Acquire(ctx)
	require.NoError(t, err)
	require.Greater(t, h.FencingToken(), first)
	require.NoError(t, h.Release(ctx))
}
