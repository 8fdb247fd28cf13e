package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appSchema creates, as admin (a superuser pool), a schema of the test's
// own, where an application role gets no CREATE whatever the server
// version (before PostgreSQL 15, PUBLIC may create in schema public), and
// returns its name. It is dropped with what it holds when the test ends,
// after the roles and pools made after it.
func appSchema(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	schema := fmt.Sprintf("distlock_app_%08x", rand.Uint32())
	_, err := admin.Exec(context.Background(), `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
		require.NoError(t, err)
	})
	return schema
}

// newAppRole creates a login role that owns nothing and may only read and
// write table (with USAGE on schema), as an application role next to a
// migration role that owns the schema, and returns a pool connected as
// it. admin is a superuser pool. The role goes when the test ends, after
// the pool (and whatever the test opened on it afterwards) is closed.
func newAppRole(t *testing.T, admin *pgxpool.Pool, schema, table string) *pgxpool.Pool {
	t.Helper()
	return newGrantedRole(t, admin, schema, fmt.Sprintf(`SELECT, INSERT, UPDATE, DELETE ON %s`, table))
}

// newGrantedRole is newAppRole with the given privileges instead, each
// "<privileges> ON <object>". The role has USAGE but no CREATE on schema,
// which the test checks.
func newGrantedRole(t *testing.T, admin *pgxpool.Pool, schema string, grants ...string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	role := fmt.Sprintf("distlock_app_%08x", rand.Uint32())
	_, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			_, err := admin.Exec(context.Background(), q)
			require.NoError(t, err, q)
		}
	})
	qs := []string{`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role}
	for _, g := range grants {
		qs = append(qs, fmt.Sprintf(`GRANT %s TO %s`, g, role))
	}
	for _, q := range qs {
		_, err := admin.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	var create bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT has_schema_privilege($1, $2, 'CREATE')`, role, schema).Scan(&create))
	require.False(t, create, "the role may create in schema %s", schema)
	return newPool(t, func(c *pgxpool.Config) { c.ConnConfig.User = role })
}

// oldMembersTable creates a members table in schema in the layout of the
// version before values (no value column), dropped when the test ends, and
// returns its name, "<schema>.<table>".
func oldMembersTable(t *testing.T, admin *pgxpool.Pool, schema string) string {
	t.Helper()
	table := fmt.Sprintf("%s.distlock_members_legacy_%08x", schema, rand.Uint32())
	_, err := admin.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE %s (grp text, id text, expires_at timestamptz NOT NULL, PRIMARY KEY (grp, id))`, table))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), `DROP TABLE `+table)
		require.NoError(t, err)
	})
	return table
}

// hasValueColumn reports whether table has the value column.
func hasValueColumn(t *testing.T, admin *pgxpool.Pool, table string) bool {
	t.Helper()
	var has bool
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_attribute
WHERE attrelid = $1::text::regclass AND attname = 'value' AND NOT attisdropped)`, table).Scan(&has))
	return has
}

// A members table of an earlier version that the Provider's user may not
// alter: membership works without values, Announce fails with
// core.ErrUnsupported and registers nothing, the table is left as it is,
// and one warning says how to add the column. A Provider opened after the
// column is added uses it.
func TestMembershipLegacyTable(t *testing.T) {
	ctx := context.Background()
	admin := newPool(t)
	schema := appSchema(t, admin)
	table := oldMembersTable(t, admin, schema)
	pool := newAppRole(t, admin, schema, table)
	var logs locktest.LogBuffer
	p := newProviderOn(t, pool, WithMembersTable(table), WithLogger(logs.Logger()))
	group := uniqueName(t, "group")

	// The first calls race for the setup.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ids, err := p.Members(ctx, group)
			assert.NoError(t, err)
			assert.Empty(t, ids)
		})
	}
	wg.Wait()

	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	ids, err := p.Heartbeat(ctx, group, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids)
	ids, err = p.Heartbeat(ctx, group, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids, "a refresh lists the id once")

	_, err = p.Announce(ctx, group, "c", time.Minute, []byte("v"))
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.ErrorContains(t, err, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN value bytea`, quoteIdent(table)))
	var named *core.Error
	require.ErrorAs(t, err, &named)
	require.Equal(t, "announce", named.Op)
	ids, err = p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids, "Announce registered nothing")

	require.NoError(t, p.Deregister(ctx, group, "a"))
	ids, err = p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, ids)

	require.False(t, hasValueColumn(t, admin, table), "the table was altered")
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	require.Contains(t, logs.String(), "table="+table)
	require.Contains(t, logs.String(), fmt.Sprintf(`ALTER TABLE %s ADD COLUMN value bytea`, strings.ReplaceAll(quoteIdent(table), `"`, `\"`)))

	// The owner adds the column: a Provider opened now announces; the
	// one opened before still does without.
	_, err = admin.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN value bytea`, quoteIdent(table)))
	require.NoError(t, err)
	ms, err := newProviderOn(t, pool, WithMembersTable(table)).Announce(ctx, group, "c", time.Minute, []byte("v"))
	require.NoError(t, err)
	require.Equal(t, []core.Member{{ID: "b"}, {ID: "c", Value: []byte("v")}}, ms)
	_, err = p.Announce(ctx, group, "d", time.Minute, nil)
	require.ErrorIs(t, err, core.ErrUnsupported)
	ids, err = p.Heartbeat(ctx, group, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, ids)
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
}

// A user that may not create the members table where it is missing gets
// the server's error from every membership call, not ErrUnsupported.
func TestMembershipLegacyNoCreate(t *testing.T) {
	ctx := context.Background()
	admin := newPool(t)
	schema := appSchema(t, admin)
	pool := newAppRole(t, admin, schema, oldMembersTable(t, admin, schema))
	p := newProviderOn(t, pool, WithMembersTable(fmt.Sprintf("%s.distlock_members_absent_%08x", schema, rand.Uint32())))
	_, err := p.Members(ctx, uniqueName(t, "group"))
	require.ErrorContains(t, err, "permission denied")
	require.NotErrorIs(t, err, core.ErrUnsupported)
	_, err = p.Announce(ctx, uniqueName(t, "group"), "a", time.Minute, nil)
	require.ErrorContains(t, err, "permission denied")
	require.NotErrorIs(t, err, core.ErrUnsupported)
}
