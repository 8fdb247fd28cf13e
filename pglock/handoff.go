package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Local handoff (kit.Handoffs owns the policy: the line, the run bounds,
// grants to waiters that gave up). A session advisory lock belongs to the
// connection that took it, not to a handle, so when an exclusive lock is
// released while an Acquire of the same Provider waits for it, the release
// can leave the lock on the holder's connection and just move the grant to
// that waiter: no unlock, no server wake-up of the next backend, no new
// lock call.
//
// The waiter's token is drawn by the release: one nextval of the fence
// sequence on the holder's connection. It succeeds only while the session,
// and with it the lock, lives, so the token is larger than every earlier
// grant's, and a session terminated from outside hands nothing on: the
// draw fails, the connection is failed, and the local waiters compete on
// the server like everyone else. Handoffs need the fence sequence: with
// WithFenceTable a grant's token comes with a holder row, and pglock keeps
// the server handover there.
//
// While the key is held by a local exclusive grant, the first waiter waits
// locally rather than in the server's queue, so that the release can hand
// over to it. A waiter that is trying or blocking on the server is never
// handed a grant: a handoff and a server grant can never both land.
// Other sessions' waiters are only granted the lock when it is unlocked,
// which a handoff never does: a run is bounded (WithLocalHandoff).

// errBroken is why a broken connection hands nothing on.
var errBroken = errors.New("pglock: connection broken")

// handoffOn reports whether exclusive grants of p may be handed on locally.
func (p *Provider) handoffOn() bool {
	return p.hand.On() && p.sql.seq
}

// localHolder reports whether key is held by a live local exclusive grant.
func (p *Provider) localHolder(wake string, key Key) bool {
	g, ok := p.hand.Holder(wake)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !g.c.broken && g.c.held[key] == g
}

// acquireLocal is Acquire for an exclusive lock with handoffs on: the
// caller lines up behind this Provider's earlier waiters for the key; once
// first, each attempt takes a grant a release handed it, waits locally
// while a local exclusive grant holds the key, and otherwise tries and
// blocks on the server as attempt does.
func (l *locker) acquireLocal(ctx context.Context, wake <-chan struct{}, attempt kit.Attempt) (core.Handle, error) {
	p := l.p
	return p.hand.Wait(ctx, l.fence, l.fence, func(ctx context.Context, w *kit.Waiter[*kit.BaseHandle]) (core.Handle, error) {
		return kit.Wait(ctx, kit.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok := p.hand.Take(l.fence, w); ok {
				return g, 0, nil
			}
			if p.localHolder(l.fence, l.key) || !p.hand.Away(w) {
				// Held here (or a handoff to us is under way): its release
				// hands the lock over, or unlocks and wakes us.
				return nil, 0, kit.Busy("held by this process")
			}
			h, retry, err := attempt(ctx)
			p.hand.Back(w)
			return h, retry, err
		})
	})
}

// handOff passes g, being released, to the first local waiter of its line
// (kit.Handoffs.Pass) with a token drawn on g's connection. It reports
// whether it did: the lock then stays held by the connection under the
// waiter's new grant.
func (p *Provider) handOff(ctx context.Context, g *grant) bool {
	if !g.handoff {
		return false
	}
	handed, _ := p.hand.Pass(ctx, g.wake, g.run, func(ctx context.Context, run kit.Run) (*kit.BaseHandle, error) {
		c := g.c
		c.mu.Lock()
		defer c.mu.Unlock()
		if !p.holds(g) {
			return nil, errBroken
		}
		token, err := g.draw(ctx)
		if err != nil {
			return nil, err
		}
		n := &grant{c: c, key: g.key, mode: g.mode, wake: g.wake, name: g.name, handoff: true, run: run}
		n.h = kit.NewHandle(uint64(token), func(rctx context.Context) error {
			return p.release(rctx, n)
		})
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.broken {
			return nil, errBroken
		}
		c.held[g.key] = n
		p.hand.SetHolder(g.wake, n)
		return n.h, nil
	})
	return handed
}

// holds reports whether g's connection is sound and still holds g.
func (p *Provider) holds(g *grant) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !g.c.broken && g.c.held[g.key] == g
}

// draw takes one token from the fence sequence on g's connection (locked)
// while g holds the lock. A broken connection is failed, which loses g.
func (g *grant) draw(ctx context.Context) (int64, error) {
	c := g.c
	p := c.p
	octx, unbound := c.bound(ctx)
	var token int64
	err := c.pc.QueryRow(octx, p.sql.bump(), g.wake, p.opts.identity).Scan(&token)
	unbound()
	if err != nil && c.connFailed(err) {
		c.fail(fmt.Errorf("draw a handoff token: %w", err))
	}
	return token, err
}
