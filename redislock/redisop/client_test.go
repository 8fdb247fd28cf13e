package redisop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newClient(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(redistest.Client(t, redistest.Addr(t)), redistest.Prefix())
	require.NoError(t, err)
	return c
}

func TestClientRetriedAcquireKeepsTheGrant(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for _, l := range []Lock{
		{Kind: KindMutex, Name: "m"},
		{Kind: KindWrite, Name: "w"},
		{Kind: KindRead, Name: "r"},
		{Kind: KindSemaphore, Name: "s", Max: 1},
	} {
		t.Run(l.Kind.String(), func(t *testing.T) {
			owner := NewOwner()
			first, err := c.Acquire(ctx, l, owner, time.Minute, 0)
			require.NoError(t, err)
			require.True(t, first.Acquired)
			// The driver resends a request whose reply it lost: same owner.
			again, err := c.Acquire(ctx, l, owner, time.Minute, 0)
			require.NoError(t, err)
			require.True(t, again.Acquired)
			assert.GreaterOrEqual(t, again.Token, first.Token)

			otherOwner := NewOwner()
			other, err := c.Acquire(ctx, l, otherOwner, time.Minute, 0)
			require.NoError(t, err)
			if l.Kind == KindRead {
				assert.True(t, other.Acquired, "readers share")
				_, err = c.Release(ctx, Grant{Lock: l, Owner: otherOwner})
				require.NoError(t, err)
			} else {
				assert.False(t, other.Acquired)
				assert.Positive(t, other.RetryIn, "busy answers say how long the holder has left")
			}
			released, err := c.Release(ctx, Grant{Lock: l, Owner: owner})
			require.NoError(t, err)
			assert.True(t, released)
			released, err = c.Release(ctx, Grant{Lock: l, Owner: owner})
			require.NoError(t, err)
			assert.False(t, released, "a second release finds nothing")
		})
	}
}

func TestClientMutexQueueIsFIFO(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	l := Lock{Kind: KindMutex, Name: "q"}
	holder, w1, w2, w3 := NewOwner(), NewOwner(), NewOwner(), NewOwner()
	acquire := func(owner string, wait time.Duration) Result {
		t.Helper()
		r, err := c.Acquire(ctx, l, owner, time.Minute, wait)
		require.NoError(t, err)
		return r
	}
	require.True(t, acquire(holder, 0).Acquired)
	for _, w := range []string{w1, w2, w3} {
		require.False(t, acquire(w, time.Minute).Acquired)
	}

	// The release hands the lock to w1 at once; nobody else gets in.
	key, token := parseHandoff(releaseHeard(t, c, Grant{Lock: l, Owner: holder}))
	assert.Equal(t, c.HandoffKey(l, w1), key)
	assert.Positive(t, token)
	assert.True(t, strings.HasPrefix(c.Redis().Get(ctx, c.Key(l)).Val(), w1+":"), "held by w1")
	assert.False(t, acquire(NewOwner(), 0).Acquired, "TryAcquire does not jump the queue")
	assert.False(t, acquire(w3, time.Minute).Acquired, "nor does a later waiter")

	// w2 gives up; w1's release skips it.
	require.NoError(t, c.Withdraw(ctx, Grant{Lock: l, Owner: w2}))
	ok, err := c.Release(ctx, Grant{Lock: l, Owner: w1})
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(c.Redis().Get(ctx, c.Key(l)).Val(), w3+":"), "held by w3")
	r := acquire(w3, time.Minute)
	require.True(t, r.Acquired, "a waiter that missed the message claims the lock")
	assert.Greater(t, r.Token, token)
	assert.Equal(t, r.Token, acquire(w3, time.Minute).Token, "claiming twice keeps the token")

	// A waiter that stops refreshing its entry is skipped.
	w4 := NewOwner()
	require.False(t, acquire(w4, 20*time.Millisecond).Acquired)
	time.Sleep(50 * time.Millisecond) // let w4's entry expire: that is the event under test
	ok, err = c.Release(ctx, Grant{Lock: l, Owner: w3})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, c.Redis().Exists(ctx, c.Key(l)).Val(), "nobody left to hand the lock to")
}

func TestClientWithdrawAfterHandoffReleases(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	l := Lock{Kind: KindMutex, Name: "w"}
	holder, w1 := NewOwner(), NewOwner()
	r, err := c.Acquire(ctx, l, holder, time.Minute, 0)
	require.NoError(t, err)
	require.True(t, r.Acquired)
	r, err = c.Acquire(ctx, l, w1, time.Minute, time.Minute)
	require.NoError(t, err)
	require.False(t, r.Acquired)
	_, err = c.Release(ctx, Grant{Lock: l, Owner: holder})
	require.NoError(t, err)
	// w1 gave up just as the lock was handed to it: withdrawing frees it.
	require.NoError(t, c.Withdraw(ctx, Grant{Lock: l, Owner: w1}))
	assert.Zero(t, c.Redis().Exists(ctx, c.Key(l)).Val())
}

func TestClientExtendAll(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	var gs []Grant
	for _, l := range []Lock{
		{Kind: KindMutex, Name: "a"}, {Kind: KindMutex, Name: "b"},
		{Kind: KindRead, Name: "c"}, {Kind: KindSemaphore, Name: "d", Max: 2},
	} {
		g := Grant{Lock: l, Owner: NewOwner()}
		r, err := c.Acquire(ctx, l, g.Owner, time.Second, 0)
		require.NoError(t, err)
		require.True(t, r.Acquired)
		gs = append(gs, g)
	}
	require.NoError(t, c.Redis().Del(ctx, c.Key(gs[1].Lock)).Err())
	require.NoError(t, c.Redis().ZRem(ctx, c.Key(gs[3].Lock), gs[3].Owner).Err())

	errs := c.ExtendAll(ctx, gs, time.Minute)
	require.Len(t, errs, 4)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], core.ErrLockLost)
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], core.ErrLockLost)
	assert.Greater(t, c.Redis().PTTL(ctx, c.Key(gs[0].Lock)).Val(), 10*time.Second)
	for _, g := range gs {
		_, err := c.Release(ctx, g)
		require.NoError(t, err)
	}
}

func TestExtendAllAfterScriptFlush(t *testing.T) {
	// SCRIPT FLUSH affects every client of a server: use our own.
	srv := redistest.StartServer(t)
	c, err := NewClient(redistest.Client(t, srv.Addr()), "")
	require.NoError(t, err)
	ctx := context.Background()
	g := Grant{Lock: Lock{Kind: KindMutex, Name: "a"}, Owner: NewOwner()}
	r, err := c.Acquire(ctx, g.Lock, g.Owner, time.Second, 0)
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, c.Extend(ctx, g, time.Second))
	require.NoError(t, c.Redis().ScriptFlush(ctx).Err())
	require.NoError(t, c.Extend(ctx, g, time.Minute), "pipelined extensions fall back to EVAL")
	assert.Greater(t, c.Redis().PTTL(ctx, c.Key(g.Lock)).Val(), 10*time.Second)
}

func TestParseHandoff(t *testing.T) {
	tests := []struct {
		msg, key string
		token    uint64
	}{
		{"p:{x}:mutex", "p:{x}:mutex", 0},
		{"p:{x}:mutex#abc#42", "p:{x}:mutex#abc", 42},
		{"p#:{x}:mutex#abc#42", "p#:{x}:mutex#abc", 42},
		{"p#1", "p#1", 0},
		{"p:{x}:mutex#abc#0", "p:{x}:mutex#abc#0", 0},
		{"p:{x}:mutex#abc#x1", "p:{x}:mutex#abc#x1", 0},
	}
	for _, tt := range tests {
		key, token := parseHandoff(tt.msg)
		assert.Equal(t, tt.key, key, tt.msg)
		assert.Equal(t, tt.token, token, tt.msg)
	}
}

func TestAcquireCountedAfterScriptFlush(t *testing.T) {
	// SCRIPT FLUSH affects every client of a server: use our own.
	srv := redistest.StartServer(t)
	rdb := redistest.Client(t, srv.Addr())
	c, err := NewClient(rdb, "")
	require.NoError(t, err)
	ctx := context.Background()
	for _, kind := range []Kind{KindMutex, KindWrite, KindRead, KindSemaphore} {
		// A server that has never seen the acquire script answers NOSCRIPT
		// to it while the pipelined counter bump runs first.
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		l := Lock{Kind: kind, Name: t.Name() + kind.String(), Max: 2}
		res, err := c.AcquireCounted(ctx, l, NewOwner(), time.Second, 0, 0, 0)
		require.NoError(t, err, kind.String())
		require.True(t, res.Acquired)
		require.Positive(t, res.Token)
	}
}

// TestCountersAgreeAcrossServers checks what keeps an algorithm over
// several servers at one round trip per grant: counters that agree, on
// servers whose clocks agree, advance to the same value, so the token
// needs no writing back. Two prefixes of one server stand for two servers.
// A grant whose two calls straddle a quantum's boundary may disagree: the
// test then writes the larger value back, as the algorithm does, and
// allows one such grant in a row.
func TestCountersAgreeAcrossServers(t *testing.T) {
	rdb := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for _, kind := range []Kind{KindMutex, KindWrite, KindRead, KindSemaphore} {
		var cs [2]*Client
		for i := range cs {
			c, err := NewClient(rdb, redistest.Prefix())
			require.NoError(t, err)
			cs[i] = c
		}
		l := Lock{Kind: kind, Name: t.Name() + kind.String(), Max: 2}
		disagreed := 0
		for round := range 5 {
			var tokens [2]uint64
			for i, c := range cs {
				owner := NewOwner()
				res, err := c.AcquireCounted(ctx, l, owner, time.Second, 0, 8*time.Second, 0) // a quantum of 1 s
				require.NoError(t, err, kind.String())
				require.True(t, res.Acquired, kind.String())
				tokens[i] = res.Token
				_, err = c.Release(ctx, Grant{Lock: l, Owner: owner})
				require.NoError(t, err)
			}
			if tokens[0] == tokens[1] {
				disagreed = 0
				continue
			}
			disagreed++
			require.Less(t, disagreed, 2, "%s round %d: tokens %d and %d", kind, round, tokens[0], tokens[1])
			for _, c := range cs {
				require.NoError(t, c.RaiseCounter(ctx, l, max(tokens[0], tokens[1])))
			}
		}
	}
}

// TestAcquireCountedTicketOrder checks the RedLock waiters' line on one
// server: waiters queue by the ticket they send, not by arrival; a free
// mutex is granted only to the first live waiter; a release wakes that
// waiter alone, by its handoff key, and hands nothing over; a waiter that
// gives up leaves the line.
func TestAcquireCountedTicketOrder(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	l := Lock{Kind: KindMutex, Name: t.Name()}
	acquire := func(owner string, wait time.Duration, ticket uint64) Result {
		t.Helper()
		r, err := c.AcquireCounted(ctx, l, owner, time.Minute, wait, 0, ticket)
		require.NoError(t, err)
		return r
	}
	holder, late, early, other := NewOwner(), NewOwner(), NewOwner(), NewOwner()
	require.True(t, acquire(holder, 0, 0).Acquired)
	require.False(t, acquire(late, time.Minute, 200).Acquired)
	require.False(t, acquire(early, time.Minute, 100).Acquired, "the lower ticket, arriving later")

	key, token := parseHandoff(releaseHeard(t, c, Grant{Lock: l, Owner: holder}))
	assert.Equal(t, c.HandoffKey(l, early), key, "the first in ticket order is woken")
	assert.Zero(t, token, "and handed nothing")
	assert.Zero(t, c.Redis().Exists(ctx, c.Key(l)).Val(), "the lock is free")

	assert.False(t, acquire(late, time.Minute, 200).Acquired, "a free lock is owed to the first waiter")
	assert.False(t, acquire(other, 0, 0).Acquired, "a try does not jump the line")
	r := acquire(early, time.Minute, 100)
	require.True(t, r.Acquired)
	assert.True(t, strings.HasSuffix(c.Redis().Get(ctx, c.Key(l)).Val(), "+"), "marked awaited: late still waits")

	// The first waiter gives up before its turn comes: the next one's.
	require.NoError(t, c.Withdraw(ctx, Grant{Lock: l, Owner: early}))
	assert.Zero(t, c.Redis().Exists(ctx, c.Key(l)).Val(), "withdrawing released early's grant")
	assert.True(t, acquire(late, time.Minute, 200).Acquired)
}

// TestAcquireCountedTicketInbox: with WithTicketInbox, a release hands
// the lock to the first waiter in ticket order, with a token above the
// counter of that waiter's last busy answer, and announces it on that
// waiter's inbox alone: nothing goes to the other waiters' inboxes or to
// the shared channel. A server still young only wakes that waiter, and
// leaves the lock free.
func TestAcquireCountedTicketInbox(t *testing.T) {
	for _, young := range []bool{false, true} {
		t.Run(fmt.Sprint("young=", young), func(t *testing.T) {
			var guard time.Duration
			if young {
				guard = time.Minute
			}
			testTicketRelease(t, guard)
		})
	}
}

func testTicketRelease(t *testing.T, guard time.Duration) {
	base := newClient(t)
	first, second := base.WithTicketInbox(base.Channel()+":a", guard), base.WithTicketInbox(base.Channel()+":b", guard)
	ctx := context.Background()
	l := Lock{Kind: KindMutex, Name: t.Name()}
	acquire := func(c *Client, owner string, wait time.Duration, ticket uint64) Result {
		t.Helper()
		r, err := c.AcquireCounted(ctx, l, owner, time.Minute, wait, guard, ticket)
		require.NoError(t, err)
		return r
	}
	holder, early, late := NewOwner(), NewOwner(), NewOwner()
	held := acquire(second, holder, 0, 0)
	require.True(t, held.Acquired)
	require.False(t, acquire(second, late, time.Minute, 200).Acquired)
	busy := acquire(first, early, time.Minute, 100)
	require.False(t, busy.Acquired)
	require.GreaterOrEqual(t, busy.Counter, held.Token, "the busy answer's counter")
	assert.Equal(t, guard > 0, busy.Young > 0, "the busy answer says whether the server is young")

	// One subscriber connection hears the messages in the order the server
	// sent them: the sentinel published after the release comes after
	// whatever the release published.
	sub := base.Redis().Subscribe(ctx, base.Channel(), first.Inbox(), second.Inbox())
	defer sub.Close()
	for range 3 {
		_, err := sub.Receive(ctx)
		require.NoError(t, err)
	}
	ok, err := second.Release(ctx, Grant{Lock: l, Owner: holder})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, base.Redis().Publish(ctx, base.Channel(), "sentinel").Err())
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Equal(t, first.Inbox(), msg.Channel, "the first waiter's inbox")
	key, token := parseHandoff(msg.Payload)
	assert.Equal(t, first.HandoffKey(l, early), key)
	msg, err = sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Equal(t, "sentinel", msg.Payload, "the release published nowhere else")
	if guard > 0 {
		assert.Zero(t, token, "handed over by a young server")
		assert.Zero(t, base.Redis().Exists(ctx, base.Key(l)).Val(), "the lock is free")
		assert.True(t, acquire(first, early, time.Minute, 100).Acquired)
		return
	}
	assert.Greater(t, token, busy.Counter, "the handover's token")
	assert.Equal(t, early+":"+fmt.Sprint(token)+"+", base.Redis().Get(ctx, base.Key(l)).Val(),
		"the lock's value: handed over, the late waiter still queued")
	again := acquire(first, early, time.Minute, 100)
	assert.True(t, again.Acquired, "the heir's next try finds its grant")
	assert.GreaterOrEqual(t, again.Token, token)
	r := acquire(second, late, time.Minute, 200)
	assert.False(t, r.Acquired)
	assert.GreaterOrEqual(t, r.Counter, token, "a later busy answer's counter")
}

// releaseHeard releases g and returns what the release published on c's
// Channel.
func releaseHeard(t *testing.T, c *Client, g Grant) string {
	t.Helper()
	ctx := context.Background()
	sub := c.Redis().Subscribe(ctx, c.Channel())
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	ok, err := c.Release(ctx, g)
	require.NoError(t, err)
	require.True(t, ok)
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	return msg.Payload
}
