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
	"github.com/distlock/distlock/core/kit"
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
	_, err = p.Announce(ctx, group, "a", time.Minute, []byte("v"))
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

// TestAnnounceValueRule: a live member's value is the one a majority of
// all N servers hold, else the one with the latest stamp among the
// answering servers, so a stale value on a minority never wins, even when
// it is on most of the servers that answered.
func TestAnnounceValueRule(t *testing.T) {
	type entry struct {
		stamp uint64
		value string
	}
	cases := []struct {
		name    string
		entries [5]entry // on each server; a zero stamp: not registered there
		answer  [5]bool
		want    string
	}{
		{
			name:    "a stale value on most of the answering servers loses",
			entries: [5]entry{{200, "new"}, {200, "new"}, {200, "new"}, {100, "old"}, {100, "old"}},
			answer:  [5]bool{false, false, true, true, true},
			want:    "new",
		},
		{
			name:    "a newer value on a minority loses to the majority's",
			entries: [5]entry{{100, "settled"}, {100, "settled"}, {100, "settled"}, {200, "failed"}, {}},
			answer:  [5]bool{true, true, true, true, true},
			want:    "settled",
		},
		{
			name:    "without a majority value, the latest stamp wins",
			entries: [5]entry{{100, "x"}, {100, "x"}, {300, "y"}, {300, "y"}, {200, "z"}},
			answer:  [5]bool{true, true, true, true, true},
			want:    "y",
		},
		{
			name:    "a value is compared byte for byte, whatever its stamps",
			entries: [5]entry{{100, "same"}, {100, "same"}, {300, "same"}, {400, "other"}, {400, "other"}},
			answer:  [5]bool{true, true, true, true, true},
			want:    "same",
		},
	}
	clients := sharedClients(t, 5)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			group := uniqueName(t)
			base := redlock.DefaultPrefix + "{" + kit.SafeName(group) + "}:"
			t.Cleanup(func() {
				for _, c := range clients {
					_ = c.Del(context.Background(), base+"members", base+"members:values").Err()
				}
			})
			answering := make([]redis.UniversalClient, len(clients))
			for i, c := range clients {
				if e := tc.entries[i]; e.stamp != 0 {
					op, err := redisop.NewClient(c, redlock.DefaultPrefix)
					require.NoError(t, err)
					_, err = op.WithStamp(e.stamp).Announce(ctx, group, "a", time.Minute, []byte(e.value))
					require.NoError(t, err)
				}
				answering[i] = c
				if !tc.answer[i] {
					answering[i] = deadClient(t)
				}
			}
			ms, err := newProvider(t, answering).Announce(ctx, group, "b", time.Minute, nil)
			require.NoError(t, err)
			require.Len(t, ms, 2)
			assert.Equal(t, core.Member{ID: "a", Value: []byte(tc.want)}, ms[0])
		})
	}
}

func deadClient(t *testing.T) redis.UniversalClient {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	return dead
}
