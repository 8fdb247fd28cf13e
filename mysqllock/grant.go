package mysqllock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// A grant statement takes a lock and draws its token in one round trip
// (statements.grant); tryOn runs it without waiting, block (wait.go) lets
// it wait in the server's queue.

// claim is what one grant statement asks for: the first free lock of
// locks (one for a Mutex; a semaphore's candidate slots), with the token
// drawn from the counter row row.
type claim struct {
	name    string // for errors
	row     string
	locks   []string
	sem     bool // the statement's value carries the candidate's index (statements.grant)
	handoff bool // the grant may be handed on locally
	// args, when set, are the grant statement's parameters for a try (no
	// waiting), built once (a Mutex's); otherwise each statement builds
	// its own.
	args []any
}

// grantedBy reads the result of a statement that bumps a counter row
// (the table's grant and draw): the token, and whether a row was bumped.
func grantedBy(res sql.Result) (uint64, bool) {
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, false
	}
	id, err := res.LastInsertId()
	return uint64(id), err == nil && id > 0
}

// won is what a grant statement granted: the lock and its token.
type won struct {
	lock  string
	token uint64
}

// grantOn runs cl's grant statement on c (locked) under ctx as it is,
// waiting timeout seconds on each lock; ok reports a grant.
func (c *session) grantOn(ctx context.Context, cl claim, timeout float64) (w won, ok bool, err error) {
	p := c.p
	q, args := p.sql.grant(len(cl.locks), cl.sem), cl.args
	if args == nil || timeout != 0 {
		args = p.sql.grantArgs(cl, p.opts.Identity, timeout)
	}
	var v uint64
	if p.sql.seq {
		n, err := c.queryIntOn(ctx, q, args...)
		if err != nil {
			return won{}, false, err
		}
		v, ok = uint64(n.Int64), n.Valid && n.Int64 > 0
	} else {
		res, err := c.execOn(ctx, q, args...)
		if err != nil {
			return won{}, false, err
		}
		v, ok = grantedBy(res)
	}
	if !ok {
		return won{}, false, nil
	}
	if cl.sem {
		// The low 16 bits name the granted candidate; the token is above.
		return won{lock: cl.locks[v&0xffff], token: v >> 16}, true, nil
	}
	return won{lock: cl.locks[0], token: v}, true, nil
}

// tryOn runs cl's grant statement without waiting on c (locked), and
// unlocks c. A statement that breaks the connection fails it and returns
// an error matching kit.ErrSessionFailed.
func (p *Provider) tryOn(ctx context.Context, c *conn, cl claim) (core.Handle, error) {
	octx, unbound := c.Conn.bound(ctx)
	w, ok, err := c.Conn.grantOn(octx, cl, 0)
	unbound()
	if err == nil && ok {
		err = c.Conn.confirm(ctx, w.token)
	}
	if err != nil {
		if connFailed(err) {
			c.Fail(err)
			c.Unlock()
			return nil, fmt.Errorf("%w: %w", kit.ErrSessionFailed, err)
		}
		unlockIfHeld(ctx, c, cl.locks)
		c.Unlock()
		if contended(err) {
			return nil, kit.Busy("the server made the grant statement retry: %v", err)
		}
		return nil, err
	}
	if !ok {
		c.Unlock()
		return nil, kit.Busy("held by another session")
	}
	return p.granted(ctx, c, cl, w)
}

// granted registers the grant of cl's statement on c (locked), unlocks c,
// and returns the handle, or releases the grant when ctx ended meanwhile.
func (p *Provider) granted(ctx context.Context, c *conn, cl claim, w won) (core.Handle, error) {
	return c.Grant(ctx, &grant{Key: w.lock, Wake: cl.row, Name: cl.name, Handoff: cl.handoff}, w.token)
}
