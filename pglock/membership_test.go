package pglock

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
	group := uniqueName(t, "group")
	t.Cleanup(func() {
		for _, id := range []string{"a", "b", "c"} {
			_ = p.Deregister(ctx, group, id)
		}
	})

	ids, err := p.Members(ctx, group)
	require.NoError(t, err)
	require.Empty(t, ids)

	require.NoError(t, p.Register(ctx, group, "b", time.Minute))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	require.NoError(t, p.Register(ctx, group, "c", 50*time.Millisecond))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute), "refresh")

	// c expires on the server's clock.
	require.Eventually(t, func() bool {
		ids, err := p.Members(ctx, group)
		require.NoError(t, err)
		return len(ids) == 2
	}, 10*time.Second, 20*time.Millisecond)
	ids, err = p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids)

	require.NoError(t, p.Deregister(ctx, group, "b"))
	require.NoError(t, p.Deregister(ctx, group, "b"), "absent id")
	ids, err = p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)

	// Heartbeat registers and lists in one statement.
	ids, err = p.Heartbeat(ctx, group, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids)
	ids, err = p.Heartbeat(ctx, group, "a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids, "a refresh lists the id once")
	require.NoError(t, p.Deregister(ctx, group, "b"))

	// Another Provider (another instance) sees the same members.
	ids, err = newProvider(t, WithMembersTable("distlock_members_test")).Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)
}

// A members table made by the previous version has no value column: the
// first call adds it, and rows registered before keep being listed, with
// an empty value.
func TestMembershipOldTable(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	table := fmt.Sprintf("distlock_members_old_%08x", rand.Uint32())
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (grp text, id text, expires_at timestamptz NOT NULL, PRIMARY KEY (grp, id))`, table))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+table) })
	group := uniqueName(t, "group")
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ($1, 'old', now() + interval '1 hour')`, table), group)
	require.NoError(t, err)

	p := newProvider(t, WithMembersTable(table))
	ids, err := p.Members(ctx, group)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, ids)
	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	ids, err = p.Heartbeat(ctx, group, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "old"}, ids)
	ms, err := p.Announce(ctx, group, "c", time.Minute, []byte{0, 'c'})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "old"}, memberIDs(ms))
	for _, m := range ms {
		if m.ID != "c" {
			require.Empty(t, m.Value, m.ID)
		}
	}
	ms, err = newProvider(t, WithMembersTable(table)).Announce(ctx, group, "d", time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 'c'}, ms[2].Value, "c's value, listed by another Provider")
	require.NoError(t, p.Register(ctx, group, "c", time.Minute))
	ms, err = p.Announce(ctx, group, "d", time.Minute, nil)
	require.NoError(t, err)
	require.Empty(t, ms[2].Value, "c's value after Register")
}

func memberIDs(ms []core.Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}
