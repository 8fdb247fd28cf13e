package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/distlock/distlock/redlock"
)

// membersKey finds group's membership key on rdb.
func membersKey(t *testing.T, rdb redis.UniversalClient, group string) string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*"+strings.TrimPrefix(group, "members-")+"*members").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1, "one membership key for %s", group)
	return keys[0]
}

// TestMembershipMajority: an id is listed while a majority of the servers
// list it, whichever minority lost it.
func TestMembershipMajority(t *testing.T) {
	clients := sharedClients(t, 3)
	p := newProvider(t, clients)
	ctx := context.Background()
	group := fmt.Sprintf("members-%08x", rand.Uint32())

	members, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Empty(t, members)

	require.NoError(t, p.Register(ctx, group, "b", time.Minute))
	members, err = p.Heartbeat(ctx, group, "a", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, members, "heartbeat registers, then lists")
	key := membersKey(t, clients[0], group)
	t.Cleanup(func() {
		for _, c := range clients {
			_ = c.Del(context.Background(), key).Err()
		}
	})

	// One server forgets a: still on a majority.
	require.NoError(t, clients[0].ZRem(ctx, key, "a").Err())
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, members, "a minority that lost a member changes nothing")
	// A second one does: a is on one server of three.
	require.NoError(t, clients[1].ZRem(ctx, key, "a").Err())
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, members, "a member on a minority is not live")
	// Its next registration puts it back everywhere.
	require.NoError(t, p.Register(ctx, group, "a", time.Minute))
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, members)

	require.NoError(t, p.Deregister(ctx, group, "b"))
	require.NoError(t, p.Deregister(ctx, group, "nobody"), "removing an absent id is not an error")
	members, err = p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, members)

	require.ErrorIs(t, p.Register(ctx, "", "a", time.Minute), core.ErrInvalidName)
	for _, err := range []error{
		p.Register(ctx, group, "", time.Minute),
		p.Register(ctx, group, "a", 0),
	} {
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	}
}

// TestMembershipNeedsMajority: with a majority of the servers unreachable
// every call fails, naming the servers.
func TestMembershipNeedsMajority(t *testing.T) {
	clients := sharedClients(t, 1)
	for range 2 {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = dead.Close() })
		clients = append(clients, dead)
	}
	p, err := redlock.New(clients, redlock.WithTTL(testTTL))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	group := fmt.Sprintf("members-%08x", rand.Uint32())
	err = p.Register(ctx, group, "a", time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 of 3 servers answered, 2 needed")
	_, err = p.Members(ctx, group)
	require.Error(t, err)
	_, err = p.Heartbeat(ctx, group, "a", time.Minute)
	require.Error(t, err)
}

// TestHolderTokenAmongLateCounters: a server holding the grant whose
// counter is above the token (as after a grant that landed after the
// majority) does not change the token Holder reports, and a grant gone
// from a majority is not held.
func TestHolderTokenAmongLateCounters(t *testing.T) {
	clients := sharedClients(t, 3)
	p := newProvider(t, clients, redlock.WithIdentity("holder-test"))
	ctx := context.Background()
	m := p.Mutex(uniqueName(t))
	h, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	defer h.Release(ctx)
	insp := m.(core.Inspector)

	who, held, err := insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "holder-test", Token: h.FencingToken()}, who)

	// Wait for the grant on every server; then one counter is above the
	// token (a late grant's), if none is already.
	breakKeys := grantKeys(t, clients, h)
	above := 0
	for _, c := range clients {
		if n, err := c.Get(ctx, breakKeys.counter).Uint64(); err == nil && n > h.FencingToken() {
			above++ // a grant that landed after the majority
		}
	}
	if above == 0 {
		require.NoError(t, clients[0].Set(ctx, breakKeys.counter, h.FencingToken()+1000, 0).Err())
	}
	who, held, err = insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, h.FencingToken(), who.Token, "a larger counter on a minority is not the token")

	for _, c := range clients[:2] {
		require.NoError(t, c.Del(ctx, breakKeys.lock).Err())
	}
	_, held, err = insp.Holder(ctx)
	require.NoError(t, err)
	assert.False(t, held, "a grant on a minority is not held")
}

type lockKeys struct{ lock, counter string }

// grantKeys waits for h's grant to reach every server and returns its lock
// key and its name's counter key.
func grantKeys(t testing.TB, clients []redis.UniversalClient, h core.Handle) lockKeys {
	t.Helper()
	c, err := redisop.NewClient(clients[0], redlock.DefaultPrefix)
	require.NoError(t, err)
	key := c.Key(redlock.GrantOf(h).Lock)
	require.Eventually(t, func() bool {
		for _, rdb := range clients {
			if rdb.Exists(context.Background(), key).Val() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the grant did not reach every server")
	return lockKeys{lock: key, counter: strings.TrimSuffix(key, "mutex") + "counter"}
}
