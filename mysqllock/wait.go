package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// maxWait bounds one blocking GET_LOCK of a Mutex whose ctx has no earlier
// deadline; when it runs out the wait simply starts again.
const maxWait = time.Hour

// killGrace is how long a wait whose ctx's deadline passed is given to end
// by itself (its server timeout follows that deadline) before a KILL QUERY.
const killGrace = 20 * time.Millisecond

var errConnFailed = errors.New("connection failed")

// claim is what one grant statement asks for: the first free lock of
// locks (one for a Mutex; a semaphore's candidate slots), with the token
// drawn from the counter row row.
type claim struct {
	name    string // for errors
	row     string
	locks   []string
	sem     bool // the token carries the candidate's index (tokenExprs)
	handoff bool // the grant may be handed on locally
}

// args returns the grant statement's parameters for a wait of timeout
// seconds per lock.
func (cl claim) args(identity string, timeout float64) []any {
	args := make([]any, 0, 2+2*len(cl.locks))
	args = append(args, cl.row, identity)
	for _, l := range cl.locks {
		args = append(args, l, timeout)
	}
	return args
}

// grantedBy reads a grant statement's result: whether a lock was granted,
// and the token.
func grantedBy(res sql.Result) (uint64, bool) {
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, false
	}
	id, err := res.LastInsertId()
	return uint64(id), err == nil && id > 0
}

// tryOn runs cl's grant statement without waiting on c (locked), and
// unlocks c. A statement that breaks the connection fails it and returns
// an error matching errConnFailed.
func (p *Provider) tryOn(ctx context.Context, c *conn, cl claim) (core.Handle, error) {
	res, err := c.exec(ctx, p.sql.grant(len(cl.locks), cl.sem), cl.args(p.opts.identity, 0)...)
	if err != nil {
		if connFailed(err) {
			c.fail(err)
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", errConnFailed, err)
		}
		c.unlockIfHeld(ctx, cl.locks)
		c.mu.Unlock()
		return nil, err
	}
	token, ok := grantedBy(res)
	if !ok {
		c.mu.Unlock()
		return nil, kit.Busy("held by another session")
	}
	return p.granted(ctx, c, cl, token)
}

// granted registers the grant of cl's statement on c (locked), unlocks c,
// and returns the handle, or releases the grant when ctx ended meanwhile.
func (p *Provider) granted(ctx context.Context, c *conn, cl claim, token uint64) (core.Handle, error) {
	lock := cl.locks[0]
	if cl.sem {
		lock = cl.locks[token&0xffff]
	}
	g := &grant{c: c, lock: lock, row: cl.row, name: cl.name, handoff: cl.handoff, run: kit.StartRun(time.Now())}
	g.h = kit.NewHandle(token, func(rctx context.Context) error { return p.release(rctx, g) })
	c.addGrant(g)
	c.mu.Unlock()
	if ctx.Err() != nil {
		_ = g.h.Release(ctx)
		return nil, kit.NotAcquired(ctx)
	}
	return g.h, nil
}

// block waits in the server's queue for cl on c, a connection reserved by
// emptyConn, for at most limit and at most until ctx's deadline: one
// statement that returns when a lock is granted or the server's timeout
// runs out. When ctx ends first, a KILL QUERY on another connection ends
// the wait (killWait).
func (p *Provider) block(ctx context.Context, c *conn, cl claim, limit time.Duration) (core.Handle, time.Duration, error) {
	d := limit
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d < time.Millisecond || ctx.Err() != nil {
		c.doneWaiting()
		return nil, 0, kit.NotAcquired(ctx)
	}
	secs, _ := strconv.ParseFloat(strconv.FormatFloat(d.Seconds(), 'f', 3, 64), 64)
	res, err := p.waitOn(ctx, c, p.sql.grant(len(cl.locks), cl.sem), cl.args(p.opts.identity, secs))
	if err == nil {
		if token, ok := grantedBy(res); ok {
			h, err := p.granted(ctx, c, cl, token) // releases the grant if ctx ended
			return h, 0, err
		}
		c.doneWaiting()
		if ctx.Err() != nil {
			return nil, 0, kit.NotAcquired(ctx)
		}
		// The server's timeout ran out: look again at once.
		return nil, time.Millisecond, kit.Busy("wait timed out")
	}
	if connFailed(err) {
		// Ending the session frees a grant that may have raced the error.
		c.fail(err)
		c.mu.Unlock()
	} else if c.unlockIfHeld(ctx, cl.locks) {
		// The server may have granted a lock as the wait was killed.
		c.doneWaiting()
	} else {
		c.mu.Unlock()
	}
	if ctx.Err() != nil {
		return nil, 0, kit.NotAcquired(ctx)
	}
	return nil, 0, err
}

// waitOn runs the blocking statement q on c (locked), watched by killWait:
// ctx ends the wait without breaking the connection. It returns once no
// KILL QUERY aimed at this statement can still land, so that none ends the
// connection's next statement.
func (p *Provider) waitOn(ctx context.Context, c *conn, q string, args []any) (sql.Result, error) {
	qctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	c.abort = abort
	p.mu.Unlock()

	done, watched := make(chan struct{}), make(chan struct{})
	p.waits.Add(1)
	go func() {
		defer p.waits.Done()
		defer close(watched)
		p.killWait(ctx, c, done, abort)
	}()
	res, err := c.execOn(qctx, q, args...)
	close(done)
	<-watched
	p.mu.Lock()
	c.abort = nil
	p.mu.Unlock()
	return res, err
}

// killWait ends c's blocking statement when ctx ends before it does
// (done): KILL QUERY on a connection of the pool (after killGrace when
// ctx's deadline passed, which the server's timeout follows), which
// leaves c's session and its connection in service. When the KILL fails,
// or the statement has not ended within the Provider's timeout after it,
// abort breaks c's socket instead (and c is then failed).
func (p *Provider) killWait(ctx context.Context, c *conn, done <-chan struct{}, abort context.CancelFunc) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		grace := time.NewTimer(killGrace)
		defer grace.Stop()
		select {
		case <-done:
			return
		case <-grace.C:
		}
	}
	kctx, cancel := context.WithTimeout(context.Background(), p.opts.timeout)
	defer cancel()
	if _, err := p.db.ExecContext(kctx, "KILL QUERY "+strconv.FormatUint(c.id, 10)); err != nil {
		p.opts.log.Warn("mysqllock: KILL QUERY of an abandoned wait failed; closing its connection", "conn", c.id, "err", err)
		abort()
		return
	}
	select {
	case <-done:
	case <-kctx.Done():
		abort()
	}
}
