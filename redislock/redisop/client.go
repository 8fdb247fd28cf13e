package redisop

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

// Client runs the lock operations against one Redis deployment (a server,
// or a cluster through *redis.ClusterClient): every operation is one Lua
// script call, one round trip, and the renewal of many grants is one
// pipeline. It keeps no state of its own besides its key prefix: waiting,
// renewal on a cadence and handles live in the backend on top
// (redislock.Provider). Client is the layer a multi-server algorithm such
// as RedLock drives once per server.
//
// Keys: a lock named N lives under prefix + "{" + kit.SafeName(N) + "}:"
// followed by "mutex" (holder and token), "mutex:q", "mutex:qx" and
// "mutex:qt" (the mutex wait queue), "rw:w" (writer), "rw:r" (readers, a
// sorted set), "rw:wait" (writer-waiting marker), "sem" (semaphore holders,
// a sorted set) or "fence" (last token of the RW lock and semaphore); a
// membership group named N under "members" (ids by expiry) and
// "members:values" (their stamps and values). The {hash tag} puts all keys
// of a name in one Redis Cluster slot. Every key
// carries a TTL and releases delete what they can: no key outlives the last
// grant of a name by more than a TTL, and a name nobody holds or waits for
// has no keys at all, with one exception: under replica acknowledgment
// (WithReplicaAck) and for the multi-server operations (AcquireCounted),
// each name also has "counter", its durable fencing counter, which never
// expires.
type Client struct {
	rdb     redis.UniversalClient
	prefix  string
	channel string // Channel()
	inbox   string

	channelArg, inboxArg any           // channel and inbox, boxed once
	tickets              bool          // RedLock waiters in ticket order (WithTicketInbox)
	guard                time.Duration // with tickets: the young-server guard

	ack replicaAck // n == 0: grants are not confirmed by replicas

	stamp uint64 // recorded with membership registrations (WithStamp)
}

// NewClient returns a Client on rdb whose keys start with prefix. It does no
// I/O. A nil rdb fails with core.ErrInvalidArgument.
func NewClient(rdb redis.UniversalClient, prefix string) (*Client, error) {
	if isNil(rdb) {
		return nil, kit.Invalid("redislock: nil redis client")
	}
	c := &Client{rdb: rdb, prefix: prefix, channel: prefix + "wake"}
	c.inbox = c.channel
	c.channelArg, c.inboxArg = c.channel, c.inbox
	return c, nil
}

// WithInbox returns a copy of c whose mutex waits ask for handoffs to be
// announced on channel instead of Channel: a process that subscribes to a
// channel of its own then hears only about its own handoffs.
// redislock.Provider gives each instance one.
func (c *Client) WithInbox(channel string) *Client {
	cc := *c
	cc.inbox, cc.inboxArg = channel, channel
	return &cc
}

// WithTicketInbox returns a copy of c for RedLock waiters in ticket order
// (AcquireCounted) with the young-server guard guard: a waiter records
// channel as its inbox in each server's queue, and a mutex release hands
// the lock to the first waiter in line, announced on its inbox alone, so a
// process that subscribes to a channel of its own hears only its own
// handovers. guard must be the one the waiters pass to AcquireCounted.
func (c *Client) WithTicketInbox(channel string, guard time.Duration) *Client {
	cc := c.WithInbox(channel)
	cc.tickets, cc.guard = true, guard
	return cc
}

// Inbox is the channel on which handoffs of mutexes this Client waits for
// are announced (Channel unless set by WithInbox).
func (c *Client) Inbox() string { return c.inbox }

func isNil(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Redis returns the client's driver.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Channel is the pub/sub channel on which releases of reader-writer locks
// and semaphores are announced. The message is the WakeKey of the lock that
// may have become free. Mutex handoffs go to the waiter's Inbox.
func (c *Client) Channel() string { return c.channel }

// Acquire makes one attempt to grant l to owner for ttl: one script call.
// wait > 0 says the caller is waiting and will try again within wait. A
// mutex waiter then joins the lock's FIFO wait queue (or refreshes its
// entry): a release hands the lock straight to the first live waiter, for
// that waiter's TTL, and publishes the handoff on the waiter's Inbox (see
// HandoffKey); a waiter that missed the message claims the lock with its
// next Acquire. A writer
// that finds the lock busy marks itself waiting, which keeps new readers
// out (writer preference). Waiters must call Withdraw when they give up. A
// retry with the same
// owner after a lost reply returns the grant already made. The error is the
// driver's (or core.ErrInvalidName / ErrInvalidArgument for a bad l or ttl,
// before any I/O); a busy lock is a Result, not an error.
func (c *Client) Acquire(ctx context.Context, l Lock, owner string, ttl, wait time.Duration) (Result, error) {
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return Result{}, kit.Invalid("ttl %v is under a millisecond", ttl)
	}
	if c.ack.n > 0 {
		return c.acquireAcked(ctx, l, owner, ms, wait)
	}
	if k := c.prepared(l); k != nil && l.Kind == KindMutex {
		if wait <= 0 {
			// Neither queues nor marks: the lock key alone will do.
			return acquireResult(c.call(ctx, scriptMutexAcquire, k.try, owner, ms, 0, ""))
		}
		return acquireResult(c.call(ctx, scriptMutexAcquire, k.acquire, owner, ms, wait.Milliseconds(), c.inboxArg))
	}
	script, keys, args := c.acquireCall(l, owner, ms, wait, c.inbox)
	cmd := script.Run(ctx, c.rdb, keys, args...)
	return acquireResult(cmd)
}

// acquireCall is the script call behind one acquire attempt. A waiting
// mutex acquire joins the wait queue with handoffs announced on inbox, or,
// when inbox is "", only marks the lock as awaited. Under replica
// acknowledgment the name's durable counter comes last (withCounter).
func (c *Client) acquireCall(l Lock, owner string, ms int64, wait time.Duration, inbox string) (script, []string, []any) {
	switch l.Kind {
	case KindMutex:
		return scriptMutexAcquire, c.withCounter(l, c.mutexKeys(l)), []any{owner, ms, max(wait.Milliseconds(), 0), inbox}
	case KindWrite:
		waiting, markMS := 0, max(wait.Milliseconds(), 1)
		if wait > 0 {
			waiting = 1
		}
		return scriptWriteAcquire, c.withCounter(l, c.rwKeys(l)), []any{owner, ms, waiting, markMS}
	case KindRead:
		return scriptReadAcquire, c.withCounter(l, c.rwKeys(l)), []any{owner, ms}
	default: // KindSemaphore; validated by the caller
		return scriptSemAcquire, c.withCounter(l, []string{c.Key(l), c.FenceKey(l)}), []any{owner, ms, l.Max}
	}
}

func acquireResult(cmd *redis.Cmd) (Result, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return Result{}, err
	}
	if len(v) < 2 || len(v) > 4 {
		return Result{}, fmt.Errorf("redislock: unexpected acquire reply %v", v)
	}
	if v[0] == 1 {
		r := Result{Acquired: true, Token: uint64(v[1])}
		if len(v) == 3 {
			r.Young = time.Duration(v[2]) * time.Millisecond
		}
		return r, nil
	}
	r := Result{RetryIn: time.Duration(v[1]) * time.Millisecond}
	if len(v) >= 3 {
		r.Counter = uint64(v[2])
	}
	if len(v) == 4 {
		r.Young = time.Duration(v[3]) * time.Millisecond
	}
	return r, nil
}

// Extend pushes g's expiry to ttl from now: one script call. It returns nil
// when extended, an error matching core.ErrLockLost when the grant is gone
// or held by another owner, and the driver's error otherwise.
func (c *Client) Extend(ctx context.Context, g Grant, ttl time.Duration) error {
	return c.ExtendAll(ctx, []Grant{g}, ttl)[0]
}

// ExtendAll extends many grants in one pipeline (one round trip per server
// of a cluster) and returns one error per grant, in order, as Extend does.
func (c *Client) ExtendAll(ctx context.Context, gs []Grant, ttl time.Duration) []error {
	ms := ttl.Milliseconds()
	cmds := c.pipelined(ctx, len(gs), func(i int) (script, []string, []any) {
		g := gs[i]
		s := scriptKeyExtend
		if g.Lock.Kind == KindRead || g.Lock.Kind == KindSemaphore {
			s = scriptZsetExtend
		}
		return s, []string{c.Key(g.Lock)}, []any{g.Owner, ms}
	})
	errs := make([]error, len(gs))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n != 1:
			errs[i] = fmt.Errorf("%w: %s key %s is gone or held by another owner", core.ErrLockLost, gs[i].Lock.Kind, c.Key(gs[i].Lock))
		}
	}
	return errs
}

// pipelined sends n script calls in one pipeline by SHA and re-sends, by
// source, the ones the server did not know (its script cache was flushed or
// it restarted).
func (c *Client) pipelined(ctx context.Context, n int, call func(i int) (script, []string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	send := func(idx []int, bySHA bool) {
		pipe := c.rdb.Pipeline()
		for _, i := range idx {
			s, keys, args := call(i)
			if bySHA {
				cmds[i] = s.EvalSha(ctx, pipe, keys, args...)
			} else {
				cmds[i] = s.Eval(ctx, pipe, keys, args...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	send(all, true)
	var missing []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		send(missing, false)
	}
	return cmds
}

// Release gives g up and, when it was still held, announces the release on
// Channel so waiters try at once: one script call. It reports whether g was
// still held; a grant that expired or was taken over is left alone.
func (c *Client) Release(ctx context.Context, g Grant) (bool, error) {
	var cmd *redis.Cmd
	switch g.Lock.Kind {
	case KindMutex:
		cmd = c.mutexRelease(ctx, g, 0)
	case KindRead, KindSemaphore:
		onlyLast := 0
		if g.Lock.Kind == KindRead {
			onlyLast = 1 // only writers wait on readers
		}
		cmd = scriptZsetRelease.Run(ctx, c.rdb, []string{c.Key(g.Lock), c.FenceKey(g.Lock)},
			g.Owner, c.Channel(), c.WakeKey(g.Lock), onlyLast)
	default:
		cmd = scriptKeyRelease.Run(ctx, c.rdb, []string{c.Key(g.Lock), c.FenceKey(g.Lock)},
			g.Owner, c.Channel(), c.WakeKey(g.Lock))
	}
	n, err := cmd.Int64()
	return n == 1, err
}

// DrawToken draws a fencing token for a handoff of mutex grant g within
// its holder's process (mutex_spare.lua), renewing g for ttl: one script
// call. With cur ≠ 0 the value records cur as the holder's token and the
// new one as its spare; with cur = 0 it records the new one. It returns 0
// when g is no longer held.
func (c *Client) DrawToken(ctx context.Context, g Grant, ttl time.Duration, cur uint64) (uint64, error) {
	var cmd *redis.Cmd
	if c.ack.n > 0 {
		var acks int
		cmd, acks = c.acked(ctx, scriptMutexSpare, c.withCounter(g.Lock, c.mutexKeys(g.Lock)[:1]), []any{g.Owner, ttl.Milliseconds(), cur})
		if n, err := cmd.Int64(); err == nil && n > 0 && acks < c.ack.n {
			return 0, fmt.Errorf("%w: token for %q drawn, but acknowledged by %d of %d replicas within %v",
				core.ErrNotAcquired, g.Lock.Name, acks, c.ack.n, c.ack.timeout)
		}
	} else if k := c.prepared(g.Lock); k != nil && k.spare != nil {
		cmd = c.call(ctx, scriptMutexSpare, k.spare, g.Owner, ttl.Milliseconds(), cur)
	} else {
		cmd = scriptMutexSpare.Run(ctx, c.rdb, c.mutexKeys(g.Lock)[:1], g.Owner, ttl.Milliseconds(), cur)
	}
	n, err := cmd.Int64()
	if err != nil || n <= 0 {
		return 0, err
	}
	return uint64(n), nil
}

// mutexRelease runs mutex_release.lua for g; withdraw is 1 when g is a
// waiter that leaves the queue.
func (c *Client) mutexRelease(ctx context.Context, g Grant, withdraw int) *redis.Cmd {
	if c.tickets {
		// A handover takes its token from the name's counter, as
		// AcquireCounted does.
		args := []any{g.Owner, c.WakeKey(g.Lock), withdraw, c.channelArg, 1, c.guard.Milliseconds(), counterQuantum(c.guard)}
		if k := c.prepared(g.Lock); k != nil && k.ticketRelease != nil {
			return c.call(ctx, scriptMutexRelease, k.ticketRelease, args...)
		}
		keys := append(c.mutexKeys(g.Lock), c.counterKey(g.Lock), c.BootKey())
		return scriptMutexRelease.Run(ctx, c.rdb, keys, args...)
	}
	if c.ack.n > 0 {
		return scriptMutexRelease.Run(ctx, c.rdb, c.withCounter(g.Lock, c.mutexKeys(g.Lock)),
			g.Owner, c.WakeKey(g.Lock), withdraw, c.Channel(), 0)
	}
	if k := c.prepared(g.Lock); k != nil && k.release != nil {
		return c.call(ctx, scriptMutexRelease, k.release, g.Owner, k.wakeArg, withdraw, c.channelArg, 0)
	}
	return scriptMutexRelease.Run(ctx, c.rdb, c.mutexKeys(g.Lock), g.Owner, c.WakeKey(g.Lock), withdraw, c.Channel(), 0)
}

// Withdraw is for a waiter that gives up: one script call. A mutex waiter
// leaves the wait queue, and a lock handed to it meanwhile is released
// (handed on). A writer's writer-waiting marker is removed and the readers
// it held back are woken. It does nothing for the other kinds.
func (c *Client) Withdraw(ctx context.Context, g Grant) error {
	switch g.Lock.Kind {
	case KindMutex:
		return c.mutexRelease(ctx, g, 1).Err()
	case KindWrite:
	default:
		return nil
	}
	keys := c.rwKeys(g.Lock)
	return scriptWithdraw.Run(ctx, c.rdb, keys[2:3], g.Owner, c.Channel(), c.WakeKey(g.Lock)).Err()
}
