package redisop

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The operations below serve algorithms that run over several independent
// servers, one Client each (package redlock). They are not needed on one
// server, where the fencing token comes with the grant.

var (
	scriptCounterBump  = load("counter_bump")
	scriptCounterRaise = load("counter_raise")
)

// counterKey is the key of the durable counter of l's name: shared by every
// kind of lock on the name, never expiring, never deleted.
func (c *Client) counterKey(l Lock) string { return c.base(l) + "counter" }

// AcquireCounted makes one acquire attempt as Acquire does and, in the same
// round trip (one pipeline), increments the name's durable counter when the
// grant was made; Result.Token is then the counter's new value. A waiting
// mutex acquire (wait > 0) does not join the server's waiter queue, whose
// handoffs each server would make to a different waiter: it marks the lock
// as awaited, so that its release announces on Channel that it is free (a
// release of a lock nobody awaits announces nothing).
func (c *Client) AcquireCounted(ctx context.Context, l Lock, owner string, ttl, wait time.Duration) (Result, error) {
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return Result{}, fmt.Errorf("redislock: ttl %v is under a millisecond", ttl)
	}
	if l.Kind == KindMutex {
		// The mutex script bumps the counter itself: one script call.
		_, keys, args := c.acquireCall(l, owner, ms, wait, "")
		return acquireResult(scriptMutexAcquire.Run(ctx, c.rdb, append(keys, c.counterKey(l)), args...))
	}
	kind := "key"
	if l.Kind == KindRead || l.Kind == KindSemaphore {
		kind = "zset"
	}
	bump := func(int) (script, []string, []any) {
		return scriptCounterBump, []string{c.Key(l), c.counterKey(l)}, []any{owner, kind}
	}
	cmds := c.pipelined(ctx, 2, func(i int) (script, []string, []any) {
		if i == 0 {
			return c.acquireCall(l, owner, ms, wait, c.inbox)
		}
		return bump(i)
	})
	res, err := acquireResult(cmds[0])
	if err != nil || !res.Acquired {
		return res, err
	}
	n, err := cmds[1].Int64()
	if err == nil && n == 0 {
		// The server did not know the acquire script (NOSCRIPT), so the
		// bump ran before the grant that was re-sent after it: bump again.
		n, err = c.pipelined(ctx, 1, bump)[0].Int64()
	}
	if err != nil {
		return Result{}, err
	}
	if n <= 0 {
		return Result{}, fmt.Errorf("redislock: counter of %s not bumped after a grant", c.Key(l))
	}
	res.Token = uint64(n)
	return res, nil
}

// RaiseCounter raises the durable counter of l's name to at least to: one
// script call.
func (c *Client) RaiseCounter(ctx context.Context, l Lock, to uint64) error {
	return scriptCounterRaise.Run(ctx, c.rdb, []string{c.counterKey(l)}, strconv.FormatUint(to, 10)).Err()
}
