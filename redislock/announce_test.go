package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnnounceOldGroup: a group written by a version that kept no values
// (its ids in the sorted set alone) works with every call, its ids listed
// with empty values; Announce is one round trip; and values do not outlive
// their ids, whether they expired or an older Provider removed them.
func TestAnnounceOldGroup(t *testing.T) {
	p, rdb, hook := countedProvider(t)
	ctx := context.Background()
	group := uniqueName(t)
	zset, vals := keyBase(p, group)+"members", keyBase(p, group)+"members:values"
	t.Cleanup(func() { _ = rdb.Del(ctx, zset, vals).Err() })

	// What the previous version's Register wrote: an id scored by its
	// expiry on the server's clock, and nothing else.
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, zset, redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "old"}).Err())
	ids, err := p.Members(ctx, group)
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, ids)

	_, err = p.Announce(ctx, group, "new", time.Minute, []byte("v")) // loads the script
	require.NoError(t, err)
	hook.single.Store(0)
	ms, err := p.Announce(ctx, group, "new", time.Minute, []byte("v2"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), hook.single.Load(), "one round trip")
	assert.Equal(t, []core.Member{{ID: "new", Value: []byte("v2")}, {ID: "old"}}, ms)
	ids, err = p.Heartbeat(ctx, group, "hb", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"hb", "new", "old"}, ids)

	// The previous version's Deregister drops the id alone: the next
	// registration drops its value.
	require.NoError(t, rdb.ZRem(ctx, zset, "new").Err())
	require.NoError(t, p.Register(ctx, group, "old", time.Minute))
	assert.False(t, rdb.HExists(ctx, vals, "new").Val(), "the value of a removed id is dropped")

	// An expired member's value goes with it at the next registration.
	_, err = p.Announce(ctx, group, "short", 50*time.Millisecond, []byte("brief"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ms, err := p.Announce(ctx, group, "old", time.Minute, nil)
		return err == nil && len(ms) == 2
	}, 10*time.Second, 10*time.Millisecond)
	fields, err := rdb.HKeys(ctx, vals).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"hb", "old"}, fields)

	require.NoError(t, p.Deregister(ctx, group, "hb"))
	assert.False(t, rdb.HExists(ctx, vals, "hb").Val(), "Deregister drops the value")
}
