package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Local handoff (kit.Handoffs owns the policy: the line, the run bounds,
// grants to waiters that gave up). A user-level lock belongs to the
// session that took it, not to a handle, so when a Mutex is released while
// an Acquire of the same Provider waits for it, the release can leave the
// lock on the holder's connection and just move the grant to that waiter:
// no RELEASE_LOCK, no server wake-up of the next session, no new GET_LOCK.
//
// The waiter's token is drawn by the release: one UPDATE of the counter
// row on the holder's connection that matches only while IS_USED_LOCK
// names this session, so the token is larger than every earlier grant's,
// and a session killed from outside hands nothing on: the draw fails, the
// connection is failed, and the local waiters compete on the server like
// everyone else.
//
// While the lock is held by a local grant, the first waiter waits locally
// rather than in the server's queue, so that the release can hand over to
// it. A waiter that is trying or blocking on the server is never handed a
// grant: a handoff and a server grant can never both land. Other sessions'
// waiters are only granted the lock when it is released, which a handoff
// never does: a run is bounded (WithLocalHandoff).

// errBroken is why a broken connection hands nothing on.
var errBroken = errors.New("mysqllock: connection broken")

// localHolder reports whether lock is held by a live local grant.
func (p *Provider) localHolder(lock string) bool {
	g, ok := p.hand.Holder(lock)
	if !ok {
		return false
	}
	return p.holds(g)
}

// acquireLocal is Acquire with handoffs on: the caller lines up behind
// this Provider's earlier waiters for the lock; once first, each attempt
// takes a grant a release handed it, waits locally while a local grant
// holds the lock, and otherwise tries and blocks on the server as attempt
// does.
func (l *locker) acquireLocal(ctx context.Context, wake <-chan struct{}, attempt kit.Attempt) (core.Handle, error) {
	p := l.p
	return p.hand.Wait(ctx, l.lock, l.lock, func(ctx context.Context, w *kit.Waiter[*kit.BaseHandle]) (core.Handle, error) {
		return kit.Wait(ctx, kit.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok := p.hand.Take(l.lock, w); ok {
				return g, 0, nil
			}
			if p.localHolder(l.lock) || !p.hand.Away(w) {
				// Held here (or a handoff to us is under way): its release
				// hands the lock over, or releases it and wakes us.
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
// whether it did: the lock then stays held by the session under the
// waiter's new grant.
func (p *Provider) handOff(ctx context.Context, g *grant) bool {
	if !g.handoff {
		return false
	}
	handed, _ := p.hand.Pass(ctx, g.row, g.run, func(ctx context.Context, run kit.Run) (*kit.BaseHandle, error) {
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
		n := &grant{c: c, lock: g.lock, row: g.row, name: g.name, handoff: true, run: run}
		n.h = kit.NewHandle(token, func(rctx context.Context) error { return p.release(rctx, n) })
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.broken {
			return nil, errBroken
		}
		c.held[g.lock] = n
		p.hand.SetHolder(g.row, n)
		return n.h, nil
	})
	return handed
}

// holds reports whether g's connection is sound and still holds g.
func (p *Provider) holds(g *grant) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !g.c.broken && g.c.held[g.lock] == g
}

// draw draws a token on g's connection (locked) while the session holds
// the lock. A broken connection is failed, which loses g; a session that
// no longer holds the lock is failed too: its grants cannot be trusted.
func (g *grant) draw(ctx context.Context) (uint64, error) {
	c := g.c
	p := c.p
	var token uint64
	var ok bool
	var err error
	if p.sql.seq {
		var v sql.NullInt64
		row, cancel := c.queryRow(ctx, p.sql.draw(), g.lock)
		err = row.Scan(&v)
		cancel()
		token, ok = uint64(v.Int64), v.Valid && v.Int64 > 0
	} else {
		var res sql.Result
		if res, err = c.exec(ctx, p.sql.draw(), p.opts.identity, g.row, g.lock); err == nil {
			token, ok = grantedBy(res)
		}
	}
	if err != nil {
		if connFailed(err) {
			c.fail(fmt.Errorf("draw a handoff token: %w", err))
		}
		return 0, err
	}
	if !ok {
		c.fail(errors.New("draw a handoff token: the session no longer holds the lock"))
		return 0, errBroken
	}
	if err := c.confirm(ctx, token); err != nil {
		if connFailed(err) {
			c.fail(err)
		}
		return 0, err
	}
	return token, nil
}
