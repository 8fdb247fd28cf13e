package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// errBroken is why a session that lost its lock hands nothing on.
var errBroken = errors.New("mysqllock: connection broken")

// draw draws a token for a local handoff of g on its connection (locked)
// while the session holds the lock (the kit.SessionDriver's Draw). A broken
// connection is failed, which loses g; a session that no longer holds the
// lock is failed too: its grants cannot be trusted.
func (p *Provider) draw(ctx context.Context, g *grant) (uint64, error) {
	c := g.Session
	var token uint64
	var ok bool
	var err error
	if p.sql.seq {
		var v sql.NullInt64
		v, err = c.Conn.queryInt(ctx, p.sql.draw(), g.Key)
		token, ok = uint64(v.Int64), v.Valid && v.Int64 > 0
	} else {
		var res sql.Result
		if res, err = c.Conn.exec(ctx, p.sql.draw(), p.opts.Identity, g.Wake, g.Key); err == nil {
			token, ok = grantedBy(res)
		}
	}
	if err != nil {
		if connFailed(err) {
			c.Fail(fmt.Errorf("draw a handoff token: %w", err))
		}
		return 0, err
	}
	if !ok {
		c.Fail(errors.New("draw a handoff token: the session no longer holds the lock"))
		return 0, errBroken
	}
	if err := c.Conn.confirm(ctx, token); err != nil {
		if connFailed(err) {
			c.Fail(err)
		}
		return 0, err
	}
	return token, nil
}
