package redlock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// A release of a mutex hands the lock, on each server, to the first waiter
// in the servers' ticket-ordered lines, with a token from that server's
// counter, and announces the token on the waiter's inbox
// (redisop.Client.WithTicketInbox). The waiter holds the lock once a
// majority of the servers announced a handover it can trust, with no
// round trip of its own (two when their counters disagree: fence).
//
// A handover announced by server i is trusted when the waiter's last call
// to server i answered, busy or granted, from a server that is not young,
// with no call of the waiter in flight there since, and the token is above
// the counter in that answer (redisop.Result.Counter) and announced after
// the call was sent. The counter only grows while the server keeps its
// data, and every grant advances it, so such a handover was made after
// that answer: after the call was sent, which is where the grant's lease
// starts at the latest. A handover made before the answer is gone by then
// (the call would have claimed it otherwise), and its token is not above
// the counter. A server that lost its data since is young when it
// answers, or has dropped every subscription (its announcements from
// before cannot come after the call). The handle's lease therefore starts
// when the earliest of those calls was sent.

// answer is what server i's last answer to a waiting mutex acquire said.
type answer struct {
	start   time.Time // when the try it answered started
	counter uint64    // the name's counter in the answer
	ok      bool      // the server answered, not young, and no call of the owner is in flight there since
	// floor is the token of the last handover server i announced when the
	// call was sent: only a later announcement counts, so one from before
	// the server lost its data (and its counter) never does.
	floor uint64
}

// sent records that a call of the owner goes to server i.
func (c *calls) sent(i int) {
	c.seen[i].ok = false
	if c.turn != nil {
		_, c.seen[i].floor = c.turn.turns[i]()
	}
}

// answered records the answers of a failed try that started at start.
func (c *calls) answered(start time.Time, t *tally) {
	for i, ok := range t.reached {
		if ok {
			c.seen[i] = answer{start: start, counter: t.counter[i], ok: true, floor: c.seen[i].floor}
		}
	}
}

// handovers returns the servers that announced a trusted handover, their
// tokens, and when the earliest of the calls whose answers they follow
// started.
func (c *calls) handovers() (map[int]uint64, time.Time) {
	var granted map[int]uint64
	var start time.Time
	for i, a := range c.seen {
		_, tok := c.turn.turns[i]()
		if !a.ok || tok <= a.counter || tok <= a.floor {
			continue
		}
		if granted == nil {
			granted = make(map[int]uint64, len(c.seen))
		}
		granted[i] = tok
		if start.IsZero() || a.start.Before(start) {
			start = a.start
		}
	}
	return granted, start
}

// retry returns the attempt of a waiting Acquire after its first try: a
// mutex waiter holds the lock once a majority handed it over, and waits
// for the rest of the servers' announcements while fewer did, up to
// handoverWait. With skip, the first attempt only waits retryIn (see
// Acquire). Otherwise it tries every server.
func (l *locker) retry(c *calls, wait time.Duration, ticket uint64, skip bool, retryIn time.Duration) kit.Attempt {
	var partial time.Time // since when fewer than a majority handed the lock over
	return func(ctx context.Context) (core.Handle, time.Duration, error) {
		if c.turn != nil {
			h, pending := l.handedOver(ctx, c)
			if h != nil {
				return h, 0, nil
			}
			if pending > 0 {
				if partial.IsZero() {
					partial = time.Now()
				}
				skip = false // the turn came: no waiting for it below
				if d := handoverWait - time.Since(partial); d > 0 {
					return nil, d, errHandingOver
				}
			}
		}
		if skip {
			skip = false
			return nil, retryIn, errHeldElsewhere
		}
		partial = time.Time{}
		return l.try(ctx, c, wait, ticket)
	}
}

// handoverWait is how long a waiter that was handed the lock by fewer than
// a majority waits for the other servers' announcements, which are on
// their way when their releases ran, before it tries every server itself:
// a try claims the handovers made to it (mutex_acquire.lua).
const handoverWait = 20 * time.Millisecond

// errHandingOver is why a waiter handed the lock by fewer than a majority
// waits.
var errHandingOver = kit.Busy("handed over by fewer servers than a majority so far")

// handedOver returns the handle of the lock when a majority of the servers
// handed it to c's owner (see above). pending is the number of servers
// that did when fewer than a majority did, or none whose lease would leave
// the handle less than the minimum validity: the waiter then tries
// itself.
func (l *locker) handedOver(ctx context.Context, c *calls) (h core.Handle, pending int) {
	p := l.p
	granted, start := c.handovers()
	if len(granted) < p.quorum {
		return nil, len(granted)
	}
	deadline := start.Add(p.cfg.budget())
	fctx, cancel := context.WithDeadline(ctx, deadline)
	token, err := p.fence(fctx, l.lock, granted)
	cancel()
	if err != nil || ctx.Err() != nil || time.Now().After(deadline) {
		return nil, 0
	}
	n := len(p.servers)
	t := &tally{granted: granted, known: make([]bool, n)}
	c.mu.Lock()
	for i, due := range c.due {
		if t.known[i] = !due; t.known[i] {
			if _, ok := granted[i]; !ok {
				t.refusers = append(t.refusers, i)
			}
		}
	}
	c.mu.Unlock()
	if f := onHandover.Load(); f != nil {
		(*f)(l.lock.Name)
	}
	return p.hold(c, token, start, t), 0
}

// onHandover, set by tests, is told each time a waiter holds a lock
// handed over by a majority.
var onHandover atomic.Pointer[func(name string)]
