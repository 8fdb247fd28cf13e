package etcdlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
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

// A member key of an earlier version holds the bare id: it is listed with
// an empty value, and Announce and Register take it over. Register and an
// empty Announce still write the bare id, which earlier versions read.
func TestMemberOldFormat(t *testing.T) {
	p := newProvider(t)
	cli := connect(t, endpoints(t))
	ctx := ctxT(t, time.Minute)
	group := lockName(t)
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.Revoke(context.Background(), lease.ID) })
	_, err = cli.Put(ctx, p.memberKey(group, "old\x00ü"), "old\x00ü", clientv3.WithLease(lease.ID))
	require.NoError(t, err)

	ids, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"old\x00ü"}, ids)
	ms, err := p.Announce(ctx, group, "new", time.Minute, []byte{0xff, 0, 0xff})
	require.NoError(t, err)
	assert.Equal(t, []core.Member{{ID: "new", Value: []byte{0xff, 0, 0xff}}, {ID: "old\x00ü"}}, emptyNil(ms))

	ms, err = p.Announce(ctx, group, "old\x00ü", time.Minute, []byte("v"))
	require.NoError(t, err)
	assert.Equal(t, []core.Member{{ID: "new", Value: []byte{0xff, 0, 0xff}}, {ID: "old\x00ü", Value: []byte("v")}}, emptyNil(ms))

	raw := func(id string) string {
		t.Helper()
		resp, err := cli.Get(ctx, p.memberKey(group, id))
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		return string(resp.Kvs[0].Value)
	}
	assert.Equal(t, "new", raw("new"), "a member key holds the bare id, whatever the value")
	require.NoError(t, p.Register(ctx, group, "old\x00ü", time.Minute))
	_, err = p.Announce(ctx, group, "new", time.Minute, nil)
	require.NoError(t, err)
	values, err := cli.Get(ctx, p.valuesPrefix(group), clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Empty(t, values.Kvs, "Register and an empty Announce delete the value key")
	ids, err = p.Heartbeat(ctx, group, "new", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"new", "old\x00ü"}, ids)
	for _, id := range ids {
		require.NoError(t, p.Deregister(ctx, group, id))
	}
}

// emptyNil makes the empty values of ms nil, to compare them.
func emptyNil(ms []core.Member) []core.Member {
	for i := range ms {
		if len(ms[i].Value) == 0 {
			ms[i].Value = nil
		}
	}
	return ms
}
