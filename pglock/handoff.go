package pglock

import (
	"context"
	"fmt"
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

// handoffOn reports whether exclusive grants of p may be handed on locally.
func (p *Provider) handoffOn() bool {
	return p.sess.Hand.On() && p.sql.seq
}

// draw takes one token from the fence sequence on g's connection (locked)
// while g holds the lock (the kit.SessionDriver's Draw). A broken
// connection is failed, which loses g.
func (p *Provider) draw(ctx context.Context, g *grant) (uint64, error) {
	c := g.Session
	octx, unbound := c.Conn.bound(ctx)
	var token int64
	err := c.Conn.pc.QueryRow(octx, p.sql.bump(), g.Wake, p.opts.Identity).Scan(&token)
	unbound()
	if err != nil && c.Conn.connFailed(err) {
		c.Fail(fmt.Errorf("draw a handoff token: %w", err))
	}
	return uint64(token), err
}
