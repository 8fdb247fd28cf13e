package pglock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Local handoff. A session advisory lock belongs to the connection that
// took it, not to a handle, so when an exclusive lock is released while an
// Acquire of the same Provider waits for it, the release can leave the lock
// on the holder's connection and just move the grant to that waiter: no
// unlock, no server wake-up of the next backend, no new lock call.
//
// The waiter's token must still be strictly greater than every earlier
// grant's. As soon as a waiter is first in line behind a local holder, the
// holder's connection draws a spare token in the background (one nextval of
// the fence sequence, under the connection's mutex and the Provider's
// timeout). It is drawn while this session holds the lock without a break,
// so it is greater than the holder's token and smaller than the token of
// any grant anywhere after the lock is next unlocked: handing it over needs
// no I/O. A release that finds no spare yet draws one itself (one round
// trip, still cheaper than unlock plus the server's handover); when that
// fails, or the connection is broken, it unlocks as usual and the local
// waiters compete on the server like everyone else. Handoffs need the fence
// sequence: with WithFenceTable a grant's token comes with a holder row,
// and pglock keeps the server handover there.
//
// Waiters of one Provider for a key line up locally in arrival order; only
// the first contends, and while the key is held by a local exclusive grant
// it waits locally rather than in the server's queue, so that the release
// can hand over to it. A waiter that is trying or blocking on the server is
// never handed a grant: a handoff and a server grant can never both land.
//
// Fairness: other sessions' waiters are only granted the lock when it is
// unlocked, which a handoff never does. So a run of local handoffs is
// bounded: at most WithLocalHandoff grants in a row after the first
// (default 4) and no handoff once the run has lasted handoffSpan (20 ms);
// the release that ends a run unlocks, and the server grants the lock to
// the first waiter in its queue, which is a waiter of another process if
// one is there (this Provider's waiters queue locally until they see the
// unlock). A remote waiter is thus passed over for at most that many local
// grants, or about that long, per unlock.

// handoffSpan bounds a run of local handoffs in time, whatever the count.
const handoffSpan = 20 * time.Millisecond

// DefaultLocalHandoffs is the default longest run of consecutive local
// handoffs (WithLocalHandoff).
const DefaultLocalHandoffs = 4

// waiterState is where a waiter of a handoff line stands.
type waiterState uint8

const (
	waiterIdle    waiterState = iota // waiting locally: free to be handed the lock
	waiterTrying                     // trying or blocking on the server
	waiterGranted                    // a release handed it h
	waiterGone                       // left the line
)

// waiter is one waiting exclusive Acquire of this Provider, in its key's line.
type waiter struct {
	turn  chan struct{} // closed when the waiter becomes first in line
	state waiterState
	h     *kit.BaseHandle // set in waiterGranted
}

// handoffs holds the lines of waiting exclusive Acquires per key and the
// live local exclusive holder of each key. Guarded by Provider.mu.
type handoffs struct {
	lines   map[Key][]*waiter
	holders map[Key]*grant
}

// handoffOn reports whether exclusive grants of p may be handed on locally.
func (p *Provider) handoffOn() bool {
	return p.opts.handoffs > 0 && p.sql.seq
}

// enqueue puts a new waiter at the end of key's line.
func (p *Provider) enqueue(key Key) *waiter {
	w := &waiter{turn: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hand.lines == nil {
		p.hand.lines = make(map[Key][]*waiter)
	}
	line := append(p.hand.lines[key], w)
	p.hand.lines[key] = line
	if len(line) == 1 {
		close(w.turn)
	}
	return w
}

// leave takes w out of key's line, lets the next waiter move up, and
// returns a handle that a release handed to w and w has not taken: the
// caller then owns it.
func (p *Provider) leave(key Key, w *waiter) *kit.BaseHandle {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := w.h
	if w.state == waiterGone {
		return nil
	}
	w.state, w.h = waiterGone, nil
	line := p.hand.lines[key]
	i := slices.Index(line, w)
	if i < 0 {
		return h
	}
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(p.hand.lines, key)
		return h
	}
	p.hand.lines[key] = line
	if i == 0 {
		close(line[0].turn)
	}
	return h
}

// localHolderLocked returns key's live local exclusive grant, or nil.
// Called with p.mu held.
func (p *Provider) localHolderLocked(key Key) *grant {
	g := p.hand.holders[key]
	if g == nil || g.c.broken || g.c.held[key] != g {
		return nil
	}
	return g
}

// acquireLocal is Acquire for an exclusive lock with handoffs on: the
// caller lines up behind this Provider's earlier waiters for the key; once
// first, each attempt takes a grant a release handed it, waits locally
// while a local exclusive grant holds the key, and otherwise tries and
// blocks on the server as attempt does.
func (l *locker) acquireLocal(ctx context.Context, wake <-chan struct{}, attempt kit.Attempt) (core.Handle, error) {
	p := l.p
	w := p.enqueue(l.key)
	var h core.Handle
	var err error
	select {
	case <-w.turn:
		h, err = kit.Wait(ctx, kit.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
			p.mu.Lock()
			if w.state == waiterGranted {
				p.mu.Unlock()
				return nil, 0, nil // taken below, by leave
			}
			if g := p.localHolderLocked(l.key); g != nil {
				// Held here: wait for its release to hand the lock over
				// (or to unlock and wake us), and have a token ready.
				w.state = waiterIdle
				draw := g.wantSpareLocked()
				p.mu.Unlock()
				if draw {
					p.drawSpare(g)
				}
				return nil, 0, kit.Busy("held by this process")
			}
			w.state = waiterTrying
			p.mu.Unlock()
			h, retry, err := attempt(ctx)
			p.mu.Lock()
			if w.state == waiterTrying {
				w.state = waiterIdle
			}
			p.mu.Unlock()
			return h, retry, err
		})
	case <-ctx.Done():
		err = kit.NotAcquired(ctx)
	}
	g := p.leave(l.key, w)
	if g == nil {
		return h, err
	}
	if h == nil && (err == nil || ctx.Err() == nil) {
		// The handoff is our grant (the attempt returned nil, nil, or
		// failed otherwise while the handoff landed).
		return g, nil
	}
	// A handoff landed as the wait ended with ctx or with a grant of our
	// own (which cannot happen: a handed-on key is held, so no attempt
	// could take it; but a handle is never dropped unreleased). Give it up,
	// to the next in line if any, as a grant racing a cancellation must be.
	rctx, cancel := p.opCtx(ctx)
	_ = g.Release(rctx)
	cancel()
	if h == nil {
		err = kit.NotAcquired(ctx)
	}
	return h, err
}

// wantSpareLocked reports whether g should draw a spare token now (and
// marks it drawing): it may still hand on and has neither a spare nor a
// draw in flight. Called with p.mu held.
func (g *grant) wantSpareLocked() bool {
	if g.spare != 0 || g.drawing || !g.mayHandOff() {
		return false
	}
	g.drawing = true
	return true
}

// mayHandOff reports whether the run g belongs to is within its bounds.
func (g *grant) mayHandOff() bool {
	return g.handoff && g.run < g.c.p.opts.handoffs && time.Since(g.runStart) < handoffSpan
}

// drawSpare draws, in the background, a spare token for g's handoff on
// g's connection. Close waits for it.
func (p *Provider) drawSpare(g *grant) {
	p.mu.Lock()
	if p.closed {
		g.drawing = false
		p.mu.Unlock()
		return
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.bg.Done()
		c := g.c
		c.mu.Lock()
		defer c.mu.Unlock()
		p.mu.Lock()
		g.drawing = false
		ok := !c.broken && c.held[g.key] == g && g.spare == 0 && !g.h.Released()
		p.mu.Unlock()
		if ok {
			_ = g.draw(context.Background())
		}
	}()
}

// draw takes one token from the fence sequence on g's connection (locked)
// while g holds the lock, and keeps it as g's spare. A broken connection
// is failed, which loses g.
func (g *grant) draw(ctx context.Context) error {
	c := g.c
	p := c.p
	octx, unbound := c.bound(ctx)
	var token int64
	err := c.pc.QueryRow(octx, p.sql.bump(), g.wake, p.opts.identity).Scan(&token)
	unbound()
	if err != nil {
		if c.connFailed(err) {
			c.fail(fmt.Errorf("draw a spare token: %w", err))
		}
		return err
	}
	p.mu.Lock()
	g.spare = token
	p.mu.Unlock()
	return nil
}

// handOff passes g, being released on its connection (locked, not
// broken), to the first waiter of its line if there is one, the run is
// within its bounds and a token is at hand (drawing one if needed). It
// reports whether it did: the lock then stays held by the connection under
// the waiter's new grant.
func (p *Provider) handOff(ctx context.Context, g *grant) bool {
	if !g.handoff {
		return false
	}
	c := g.c
	first := func() *waiter {
		line := p.hand.lines[g.key]
		if len(line) == 0 || line[0].state != waiterIdle || !g.mayHandOff() {
			return nil
		}
		return line[0]
	}
	p.mu.Lock()
	w := first()
	need := w != nil && g.spare == 0
	p.mu.Unlock()
	if w == nil {
		return false
	}
	if need && g.draw(ctx) != nil {
		return false
	}
	p.mu.Lock()
	if w = first(); w == nil || c.broken {
		p.mu.Unlock()
		return false
	}
	n := &grant{c: c, key: g.key, mode: g.mode, wake: g.wake, name: g.name,
		handoff: true, run: g.run + 1, runStart: g.runStart}
	n.h = kit.NewHandle(uint64(g.spare), func(rctx context.Context) error {
		return p.release(rctx, n)
	})
	g.spare = 0
	c.held[g.key] = n
	p.hand.holders[g.key] = n
	w.state, w.h = waiterGranted, n.h
	p.mu.Unlock()
	p.notify.Notify(g.wake)
	return true
}
