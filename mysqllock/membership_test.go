package mysqllock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/require"
)

func TestMembership(t *testing.T) {
	p := newProvider(t, WithMembersTable("distlock_members_test"))
	ctx := context.Background()
	g := uniqueName(t, "g")
	for _, id := range []string{"b", "a", "B", "é"} {
		require.NoError(t, p.Register(ctx, g, id, time.Hour))
	}
	require.NoError(t, p.Register(ctx, g, "gone", time.Millisecond))
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for {
		var err error
		got, err = p.Members(ctx, g)
		require.NoError(t, err)
		if len(got) == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // the 1 ms registration expires on the server's clock
	}
	require.Equal(t, []string{"B", "a", "b", "é"}, got, "live members, byte order")
	require.NoError(t, p.Deregister(ctx, g, "a"))
	require.NoError(t, p.Deregister(ctx, g, "absent"))
	got, err := core.Heartbeat(ctx, p, g, "c", time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "b", "c", "é"}, got)
	got, err = p.Members(ctx, uniqueName(t, "empty"))
	require.NoError(t, err)
	require.Equal(t, []string{}, got)
}

// A members table made by the previous version has no value column: the
// first call adds it, and rows registered before keep being listed, with
// an empty value.
func TestMembershipOldTable(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	table := fmt.Sprintf("distlock_members_old_%08x", rand.Uint32())
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (grp VARBINARY(255), id VARBINARY(255),
expires_at DATETIME(6) NOT NULL, PRIMARY KEY (grp, id)) ENGINE=InnoDB`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP TABLE `+table) })
	g := uniqueName(t, "g")
	_, err = db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (?, 'old', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`, g)
	require.NoError(t, err)

	p := newProvider(t, WithMembersTable(table))
	got, err := p.Members(ctx, g)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, got)
	require.NoError(t, p.Register(ctx, g, "a", time.Minute))
	got, err = core.Heartbeat(ctx, p, g, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "old"}, got)
	ms, err := p.Announce(ctx, g, "c", time.Minute, []byte{0, 'c'})
	require.NoError(t, err)
	require.Len(t, ms, 4)
	for i, want := range []core.Member{{ID: "a"}, {ID: "b"}, {ID: "c", Value: []byte{0, 'c'}}, {ID: "old"}} {
		require.Equal(t, want.ID, ms[i].ID)
		require.Equal(t, string(want.Value), string(ms[i].Value), want.ID)
	}
	ms, err = newProvider(t, WithMembersTable(table)).Announce(ctx, g, "d", time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 'c'}, ms[2].Value, "c's value, listed by another Provider")
	require.NoError(t, p.Register(ctx, g, "c", time.Minute))
	ms, err = p.Announce(ctx, g, "d", time.Minute, nil)
	require.NoError(t, err)
	require.Empty(t, ms[2].Value, "c's value after Register")
}

// TestMembershipPurgeAndClose: a registration purges its group's rows that
// expired over an hour before (the Provider's first purges at once), and
// after Close every membership call fails with the closed error rather
// than a closed statement's.
func TestMembershipPurgeAndClose(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	table := fmt.Sprintf("distlock_members_purge_%08x", rand.Uint32())
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+table) })
	p := newProviderOn(t, db, WithMembersTable(table))
	g := uniqueName(t, "g")
	require.NoError(t, p.Register(ctx, g, "live", time.Minute)) // creates the table; purges nothing yet
	_, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (?, 'dead', UTC_TIMESTAMP(6) - INTERVAL 2 HOUR, ?)`, g, make([]byte, 50_000))
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE grp = ?`, g).Scan(&n))
		return n
	}
	require.Equal(t, 2, count())
	_, err = newProviderOn(t, db, WithMembersTable(table)).Announce(ctx, g, "other", time.Minute, []byte("v"))
	require.NoError(t, err)
	require.Equal(t, 2, count(), "the long-expired row purged, the live ones kept")

	require.NoError(t, p.Close())
	_, err = p.Members(ctx, g)
	require.ErrorIs(t, err, errClosed)
	_, err = p.Announce(ctx, g, "live", time.Minute, nil)
	require.ErrorIs(t, err, errClosed)
	require.ErrorIs(t, p.Deregister(ctx, g, "live"), errClosed)
	require.ErrorIs(t, p.Register(ctx, g, "live", time.Minute), errClosed)
}
