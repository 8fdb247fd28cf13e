package pglock

import (
	"context"
	"testing"
	"time"

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
