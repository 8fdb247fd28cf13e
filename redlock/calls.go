package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// calls is what one acquire (the tries of an Acquire, or a TryAcquire's
// one, all under one owner) has in flight on each server, and what each
// server may still hold of it. A server has at most one call of the owner
// at a time: a try skips a server whose earlier call has not answered, and
// a give-back or withdrawal is sent to a server only once the call before
// it answered. So a stalled server holds no try and no give-up back, and
// a give-back can never meet a later try's grant of the same owner on its
// way, since that try was not sent there. A give-back that failed may
// still run on the server (a request the client gave up on can sit in a
// paused server's input), so the server is sent the give-back again, not
// an acquire, until one succeeds: a request after it would then have to
// overtake it on the server, across connections, to be deleted by it.
type calls struct {
	p      *Provider
	g      redisop.Grant
	queued bool // a waiting mutex acquire or writer: it leaves the queue when it gives up
	done   chan reply[bool]

	mu      sync.Mutex
	due     []bool // server i has a call of the owner in flight
	shunned []bool // the last give-back on server i failed: tries send it another
	mayHold []bool // server i may hold a grant of the owner
	phase   phase
	st      *stragglers // once won

	// For a waiting mutex acquire, the servers' announcements, and what
	// the last answer of each server said (handover.go); only the
	// Acquire's goroutine uses seen.
	turn *turnHeard
	seen []answer
}

// phase is where the acquire stands: a server's late answer is dealt with
// according to it.
type phase int

const (
	trying phase = iota // a late grant is given back; a place in line is kept
	won                 // a late grant belongs to the handle (stragglers)
	gaveUp              // everything the owner left on the server is undone
)

func newCalls(p *Provider, g redisop.Grant, wait bool) *calls {
	n := len(p.servers)
	return &calls{
		p: p, g: g,
		queued:  wait && (g.Lock.Kind == redisop.KindMutex || g.Lock.Kind == redisop.KindWrite),
		done:    make(chan reply[bool], n),
		due:     make([]bool, n),
		mayHold: make([]bool, n),
		shunned: make([]bool, n),
		seen:    make([]answer, n),
	}
}

// giveUp ends an acquire that got no handle: every server gives back what
// the owner may hold there and, for a waiting mutex acquire or writer,
// withdraws its place in line or its marker, each once its last call
// answered. It returns as a Release does (see awaitRelease), counting
// every server, those still answering an earlier call too: a grant left
// on a majority would keep the lock from the next caller for a TTL though
// nobody holds it, and a server that stopped answering delays the return
// by a short grace only.
func (c *calls) giveUp() {
	c.mu.Lock()
	c.phase = gaveUp
	start := time.Now()
	all := make([]bool, len(c.due))
	for i, d := range c.due {
		all[i] = true
		if !d {
			c.finalLocked(i)
		}
	}
	c.mu.Unlock()
	_ = c.p.awaitRelease(c.g, start, all, c.done)
}

// inLine says whether the acquire is a waiting mutex acquire, which
// lines up in the servers' queues and leaves them once it holds the lock.
func (c *calls) inLine() bool { return c.queued && c.g.Lock.Kind == redisop.KindMutex }

// claim marks every server without a call in flight as busy with the next
// try, and returns them and how many were skipped: those with a call in
// flight, and those whose last give-back failed, which are sent it again.
func (c *calls) claim() (send []bool, skipped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	send = make([]bool, len(c.due))
	for i, d := range c.due {
		switch {
		case d:
			skipped++
		case c.shunned[i]:
			skipped++
			c.releaseLocked(i, nil)
		default:
			c.due[i], send[i] = true, true
			c.sent(i)
		}
	}
	return send, skipped
}

// follow reads the late replies of a decided try in the background (its
// phase is already set) and calls cancel, which ends the try's calls, once
// all have arrived.
func (c *calls) follow(replies <-chan reply[redisop.Result], late int, cancel context.CancelFunc) {
	if late == 0 {
		cancel()
		return
	}
	c.p.bg.Add(1)
	go func() {
		defer c.p.bg.Done()
		defer cancel()
		for range late {
			r := <-replies
			c.landed(r.i, r.err != nil || r.v.Acquired)
		}
	}()
}

// landed records server i's acquire reply, mayHold saying whether the call
// may have granted, after its try was decided.
func (c *calls) landed(i int, mayHold bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mayHold[i] = c.mayHold[i] || mayHold
	if c.phase == trying && c.mayHold[i] {
		c.releaseLocked(i, nil) // the server stays due until it answers
		return
	}
	c.due[i] = false
	c.settleLocked(i)
}

// releaseLocked gives the owner's grant on server i back; due[i] is set
// until the server answers, and then notify, if any, is sent a value.
func (c *calls) releaseLocked(i int, notify chan<- struct{}) {
	c.due[i] = true
	c.call(i, func(ctx context.Context, cl *redisop.Client) error {
		_, err := cl.Release(ctx, c.g)
		return err
	}, func(err error) {
		c.mu.Lock()
		c.due[i] = false
		c.shunned[i] = err != nil
		if err == nil {
			c.mayHold[i] = false
		}
		c.settleLocked(i)
		c.mu.Unlock()
		if notify != nil {
			notify <- struct{}{}
		}
	})
}

// settleLocked deals with server i, whose last call answered after its try
// was decided, as the phase wants.
func (c *calls) settleLocked(i int) {
	switch c.phase {
	case won:
		if c.st == nil {
			return // every server had answered the winning try
		}
		// A grant there is the handle's, released with it; a place in
		// line there would hold the next waiters back.
		c.st.arrived(i, c.mayHold[i])
		if c.inLine() && !c.mayHold[i] {
			c.p.leaveQueue(c.g, i)
		}
	case gaveUp:
		c.finalLocked(i)
	}
}

// finalLocked undoes what the owner may have left on server i, which has
// no call in flight: its grant, and its place in line or writer's marker.
// It reports server i's answer on done, where giveUp waits for it, at once
// when there is nothing to undo.
func (c *calls) finalLocked(i int) {
	hold, queued := c.mayHold[i], c.queued
	if !hold && !queued {
		c.done <- reply[bool]{i: i, v: true}
		return
	}
	c.due[i] = true
	c.call(i, func(ctx context.Context, cl *redisop.Client) error {
		var err error
		if queued {
			err = cl.Withdraw(ctx, c.g) // for a mutex, a grant goes with it
		}
		if hold && err == nil && !c.inLine() {
			_, err = cl.Release(ctx, c.g)
		}
		return err
	}, func(err error) {
		c.mu.Lock()
		c.due[i] = false
		c.mu.Unlock()
		c.done <- reply[bool]{i: i, v: err == nil, err: err}
	})
}

// call runs f on server i on a worker, then then with its error.
func (c *calls) call(i int, f func(ctx context.Context, cl *redisop.Client) error, then func(err error)) {
	s := c.p.servers[i]
	c.p.work.run(func() {
		ctx, cancel := context.WithTimeout(c.p.bgCtx, kit.CleanupTimeout)
		err := f(ctx, s.client)
		cancel()
		if err != nil {
			err = fmt.Errorf("%s: %w", s.name, err)
		}
		then(err)
	})
}
