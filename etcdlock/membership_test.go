package etcdlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMembership(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := ctxT(t, time.Minute)
	group := lockName(t)

	require.NoError(t, p1.Register(ctx, group, "a", time.Minute))
	require.NoError(t, p2.Register(ctx, group, "b/ü", time.Minute))
	require.NoError(t, p2.Register(ctx, group+"-other", "x", time.Minute))
	ids, err := p1.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b/ü"}, ids)

	ids, err = p2.Heartbeat(ctx, group, "c", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b/ü", "c"}, ids)
	require.NoError(t, p1.Register(ctx, group, "a", time.Minute), "a refresh")

	require.NoError(t, p1.Deregister(ctx, group, "b/ü"))
	require.NoError(t, p1.Deregister(ctx, group, "never-there"))
	ids, err = p2.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, ids)

	empty, err := p1.Members(ctx, lockName(t))
	require.NoError(t, err)
	assert.Empty(t, empty)
	assert.NotNil(t, empty)
}

// A member that stops registering is dropped by the server when its lease
// expires: its ttl rounded up to whole seconds (at least the server's
// minimum lease), plus the server's expiry sweep.
func TestMemberExpires(t *testing.T) {
	p := newProvider(t)
	ctx := ctxT(t, time.Minute)
	group := lockName(t)
	require.NoError(t, p.Register(ctx, group, "stays", time.Minute))
	start := time.Now()
	require.NoError(t, p.Register(ctx, group, "goes", time.Second))
	require.Eventually(t, func() bool {
		ids, err := p.Members(ctx, group)
		return err == nil && len(ids) == 1 && ids[0] == "stays"
	}, 10*time.Second, 50*time.Millisecond)
	t.Logf("a member registered for 1s was dropped after %v", time.Since(start).Round(time.Millisecond))
}
