package mysqllock

import (
	"context"
	"errors"
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

// killRetry is how often KILL QUERY is sent again while the wait it aims
// at goes on.
const killRetry = 50 * time.Millisecond

// block waits in the server's queue for cl on c, a connection reserved by
// Sessions.Empty, for at most limit and at most until ctx's deadline: one
// statement that returns when a lock is granted or the server's timeout
// runs out. When ctx ends first, a KILL QUERY on another connection ends
// the wait (killWait).
func (p *Provider) block(ctx context.Context, c *conn, cl claim, limit time.Duration) (core.Handle, time.Duration, error) {
	d := limit
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d < time.Millisecond || ctx.Err() != nil {
		c.DoneWaiting()
		return nil, 0, kit.NotAcquired(ctx)
	}
	secs, _ := strconv.ParseFloat(strconv.FormatFloat(d.Seconds(), 'f', 3, 64), 64)
	w, ok, err := p.waitOn(ctx, c.Conn, cl, secs)
	if err == nil && ok {
		err = c.Conn.confirm(ctx, w.token)
	}
	if err == nil {
		if ok {
			h, err := p.granted(ctx, c, cl, w) // releases the grant if ctx ended
			return h, 0, err
		}
		c.DoneWaiting()
		if ctx.Err() != nil {
			return nil, 0, kit.NotAcquired(ctx)
		}
		// The server's timeout ran out: look again at once.
		return nil, time.Millisecond, kit.Busy("wait timed out")
	}
	if connFailed(err) {
		// Ending the session frees a grant that may have raced the error.
		c.Fail(err)
		c.Unlock()
	} else if unlockIfHeld(ctx, c, cl.locks) {
		// The server may have granted a lock as the wait was killed.
		c.DoneWaiting()
	} else {
		c.Unlock()
	}
	if ctx.Err() != nil {
		return nil, 0, kit.NotAcquired(ctx)
	}
	if contended(err) {
		return nil, time.Millisecond, kit.Busy("the server made the wait retry: %v", err)
	}
	return nil, 0, err
}

// waitOn runs cl's grant statement on c (locked), waiting secs on the
// server, watched by killWait: ctx ends the wait without breaking the
// connection. It returns once no KILL QUERY aimed at this statement can
// still land, so that none ends the connection's next statement.
func (p *Provider) waitOn(ctx context.Context, c *session, cl claim, secs float64) (won, bool, error) {
	qctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	if !c.waiting(abort) {
		return won{}, false, errClosed
	}
	if c.nc != nil {
		c.setDeadline(time.Time{}) // the wait is bounded by its server timeout and ctx
	}

	done, watched := make(chan struct{}), make(chan struct{})
	p.waits.Add(1)
	go func() {
		defer p.waits.Done()
		defer close(watched)
		p.killWait(ctx, c, done, abort)
	}()
	w, ok, err := c.grantOn(qctx, cl, secs)
	close(done)
	<-watched
	c.waiting(nil)
	return w, ok, err
}

// killWait ends c's blocking statement when ctx ends before it does
// (done): KILL QUERY on a connection of the pool (after killGrace when
// ctx's deadline passed, which the server's timeout follows), which
// leaves c's session and its connection in service. A KILL that reaches
// the session before the statement does finds nothing to end, so it is
// sent again every killRetry until the statement ends. When a KILL fails,
// or the statement has not ended within the Provider's timeout, abort
// breaks c's socket instead (and c is then failed).
func (p *Provider) killWait(ctx context.Context, c *session, done <-chan struct{}, abort context.CancelFunc) {
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
	kctx, cancel := context.WithTimeout(context.Background(), p.opts.Timeout)
	defer cancel()
	retry := time.NewTicker(killRetry)
	defer retry.Stop()
	for {
		if _, err := p.db.ExecContext(kctx, "KILL QUERY "+strconv.FormatUint(c.id, 10)); err != nil {
			p.log.Warn("mysqllock: KILL QUERY of an abandoned wait failed; closing its connection", "conn", c.id, "err", err)
			abort()
			return
		}
		select {
		case <-done:
			return
		case <-kctx.Done():
			abort()
			return
		case <-retry.C:
		}
	}
}
