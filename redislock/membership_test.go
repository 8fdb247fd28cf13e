package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMembership(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	group := uniqueName(t)
	t.Cleanup(func() { _ = p.client.Redis().Del(ctx, keyBase(p, group)+"members").Err() })

	members, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Empty(t, members)

	require.NoError(t, p.Register(ctx, group, "b", time.Minute))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	require.NoError(t, p.Register(ctx, group, "c", 50*time.Millisecond))
	require.NoError(t, p.Register(ctx, group, "a", time.Minute), "refresh")
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Subset(t, []string{"a", "b", "c"}, members)
	assert.IsNonDecreasing(t, members, "sorted")

	// c was not refreshed: it drops out by the server's clock.
	require.Eventually(t, func() bool {
		members, err = p.Members(ctx, group)
		return err == nil && len(members) == 2
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a", "b"}, members)

	require.NoError(t, p.Deregister(ctx, group, "b"))
	require.NoError(t, p.Deregister(ctx, group, "nobody"), "removing an absent id is not an error")
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, members)
}
