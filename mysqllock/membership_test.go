package mysqllock

import (
	"context"
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
