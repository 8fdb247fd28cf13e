package redisop

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/redis/go-redis/v9"
)

// The operations below serve algorithms that run over several independent
// servers, one Client each (package redlock). They are not needed on one
// server, where the fencing token comes with the grant.

var (
	scriptCounterBump  = load("counter_bump")
	scriptCounterRaise = load("counter_raise")
	scriptKeyReassert  = load("key_reassert")
)

// counterKey is the key of the durable counter of l's name: shared by every
// kind of lock on the name, never expiring, never deleted.
func (c *Client) counterKey(l Lock) string { return c.base(l) + "counter" }

// BootKey is the server's boot marker under c's prefix: the server time in
// ms at which a counted acquire first saw the data set (see
// AcquireCounted). It never expires. It has no hash tag, so the counted
// acquire needs a single server, not a Cluster. An operator who knows a
// server kept its data may set it to 0 to end the guard at once.
func (c *Client) BootKey() string { return c.prefix + "boot" }

// AcquireCounted makes one acquire attempt as Acquire does and, in the same
// round trip (one pipeline), increments the name's durable counter when the
// grant was made; Result.Token is then the counter's new value.
//
// A mutex attempt lines up by ticket: a waiting one (wait > 0) joins the
// server's waiter queue under ticket, which the caller sends alike to every
// server, and a free mutex is granted only to the live waiter with the
// lowest ticket (ties by owner), or to anyone when nobody waits; a try
// (wait = 0) joins nothing. Every server thus owes the lock to the same
// waiter, and after a release the waiters do not split the servers' votes.
// With WithTicketInbox a release hands the lock to that waiter, for the
// TTL of its entry, with a token from the counter as a grant would get,
// and announces HandoffKey + "#" + token on the waiter's inbox: each
// server hands it on its own, and the waiter holds the lock once a
// majority did (Result.Counter tells a handover made after an answer from
// an older one). A server still young, and a release through a Client
// without WithTicketInbox, only announce that the lock is free for the
// first waiter (HandoffKey, with no token), and that waiter takes it. A
// waiter that gives up must Withdraw from every server, or its entry holds
// the others back until it expires, wait after its last attempt; a lock
// handed to it goes with it.
//
// The counter advances to max(its value + 1, the server time in µs rounded
// up to a multiple of counterQuantum(guard)), so it starts again above its
// old values after the server lost it, provided the server's clock has
// moved on by more than the quantum. guard > 0 is the young-server guard: a
// server whose boot marker (BootKey) is absent writes it, and for guard
// after that Result.Young says how long its grants must not count yet, as
// grants it lost with its data may still be believed held until then.
func (c *Client) AcquireCounted(ctx context.Context, l Lock, owner string, ttl, wait, guard time.Duration, ticket uint64) (Result, error) {
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return Result{}, fmt.Errorf("redislock: ttl %v is under a millisecond", ttl)
	}
	if l.Kind == KindMutex {
		// The mutex script bumps the counter itself: one script call.
		inbox := ""
		if ticket != 0 && c.tickets {
			inbox = c.inbox
		}
		_, keys, args := c.acquireCall(l, owner, ms, wait, inbox)
		keys = append(keys, c.counterKey(l), c.BootKey())
		return acquireResult(scriptMutexAcquire.Run(ctx, c.rdb, keys, append(args, guard.Milliseconds(), counterQuantum(guard), ticket)...))
	}
	kind := "key"
	if l.Kind == KindRead || l.Kind == KindSemaphore {
		kind = "zset"
	}
	bump := func(int) (script, []string, []any) {
		return scriptCounterBump, []string{c.Key(l), c.counterKey(l), c.BootKey()}, []any{owner, kind, guard.Milliseconds(), counterQuantum(guard)}
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
	n, young, err := bumped(cmds[1])
	if err == nil && n == 0 {
		// The server did not know the acquire script (NOSCRIPT), so the
		// bump ran before the grant that was re-sent after it: bump again.
		n, young, err = bumped(c.pipelined(ctx, 1, bump)[0])
	}
	if err != nil {
		return Result{}, err
	}
	if n <= 0 {
		return Result{}, fmt.Errorf("redislock: counter of %s not bumped after a grant", c.Key(l))
	}
	res.Token, res.Young = uint64(n), young
	return res, nil
}

// counterQuantum returns the step, in µs, to which AcquireCounted rounds
// the server time it advances a counter to: an eighth of guard, at most a
// second. Servers whose counters agree then advance them to the same value
// unless their clocks fall on two sides of a quantum's boundary, so the
// algorithm over them rarely has counters to reconcile; and a server that
// lost its counter is still above every value handed out before once a
// guard has passed, provided the servers' clocks differ by less than three
// quarters of the guard (a counter runs at most two quanta ahead of its
// server's clock: one for the rounding, one for the increments of a busy
// name within a quantum). Without a guard nothing keeps a server that lost
// its counter out of majorities, and the counter follows the clock to the
// µs, so that a grant it makes is still above the ones before by the time
// that passed.
func counterQuantum(guard time.Duration) int64 {
	if guard <= 0 {
		return 1
	}
	return max(min(guard/8, time.Second).Microseconds(), 1)
}

// bumped reads counter_bump.lua's reply: the counter and the time the
// server is still young.
func bumped(cmd *redis.Cmd) (int64, time.Duration, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("redislock: unexpected counter reply %v", v)
	}
	return v[0], time.Duration(v[1]) * time.Millisecond, nil
}

// RaiseCounter raises the durable counter of l's name to at least to: one
// script call.
func (c *Client) RaiseCounter(ctx context.Context, l Lock, to uint64) error {
	return scriptCounterRaise.Run(ctx, c.rdb, []string{c.counterKey(l)}, strconv.FormatUint(to, 10)).Err()
}

// Reassert extends grants as ExtendAll does and, in the same pipeline,
// places again a mutex or write grant whose key is gone when the server is
// young (its data set was first seen less than guard ago: it restarted
// without its data) and the lock is free here: the extension of an
// algorithm over several servers, whose holder must not see its majority
// shrink one restart at a time. It returns one error per grant: nil when
// extended or placed again, an error matching core.ErrLockLost when the
// grant is lost (held by another owner, gone from a server that is not
// young, or a read or semaphore grant gone: those are not placed again),
// the driver's error otherwise.
func (c *Client) Reassert(ctx context.Context, gs []Grant, ttl, guard time.Duration) []error {
	ms, gms := ttl.Milliseconds(), guard.Milliseconds()
	boot := c.BootKey()
	cmds := c.pipelined(ctx, len(gs), func(i int) (script, []string, []any) {
		g := gs[i]
		switch g.Lock.Kind {
		case KindRead, KindSemaphore:
			return scriptZsetExtend, []string{c.Key(g.Lock)}, []any{g.Owner, ms}
		case KindWrite:
			keys := c.rwKeys(g.Lock)
			return scriptKeyReassert, []string{keys[0], boot, keys[1]}, []any{g.Owner, ms, 0, gms}
		}
		return scriptKeyReassert, []string{c.Key(g.Lock), boot}, []any{g.Owner, ms, 1, gms}
	})
	errs := make([]error, len(gs))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n == 0:
			errs[i] = fmt.Errorf("%w: %s key %s is gone or held by another owner", core.ErrLockLost, gs[i].Lock.Kind, c.Key(gs[i].Lock))
		}
	}
	return errs
}
