package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/go-sql-driver/mysql"
)

// conn is one long-lived connection pinned from the Provider's *sql.DB. It
// either holds any number of locks and serves tries and releases (shared),
// or runs one blocking wait (waiting), which it only starts while it holds
// nothing, so a release never queues behind a wait.
type conn struct {
	p  *Provider
	sc *sql.Conn
	id uint64    // the session's CONNECTION_ID(), what IS_USED_LOCK reports
	mu chanMutex // one statement at a time; taken before p.mu, never after
	st stmtCache // guarded by mu

	// Guarded by p.mu; held changes only under mu too.
	held    map[string]*grant // by server lock name
	waiting bool
	broken  bool
	// abort, set during a blocking wait, breaks the wait's socket.
	abort context.CancelFunc
}

// chanMutex is a mutex (a one-slot channel), so that taking it can also
// be abandoned when a timer fires.
type chanMutex chan struct{}

func (m chanMutex) Lock()   { m <- struct{}{} }
func (m chanMutex) Unlock() { <-m }

// stmtCache keeps a connection's prepared statements by text: a prepared
// statement runs in one round trip, where a query with arguments and no
// client-side interpolation costs a prepare and a close around it.
type stmtCache map[string]*sql.Stmt

// grant is one lock held on a conn.
type grant struct {
	c    *conn
	lock string // the server's lock name
	row  string // the counter row, also the Notifier key of the lock
	name string // for errors
	h    *kit.BaseHandle
	// Local handoff (handoff.go). handoff: the grant may be handed on; run:
	// its place in a run of handoffs.
	handoff bool
	run     kit.Run
}

// dial pins a connection of the pool and sets its session up.
func (p *Provider) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	sc, err := p.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &conn{p: p, sc: sc, mu: make(chanMutex, 1), st: stmtCache{}, held: make(map[string]*grant)}
	if _, err := sc.ExecContext(ctx, sessionSQL); err != nil {
		c.discard()
		return nil, err
	}
	var me *mysql.MySQLError
	if _, err := sc.ExecContext(ctx, statementTimeoutSQL); err != nil && !(errors.As(err, &me) && me.Number == 1193) {
		c.discard() // 1193: unknown variable, a MySQL server
		return nil, err
	}
	if err := sc.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&c.id); err != nil {
		c.discard()
		return nil, err
	}
	return c, nil
}

// discard closes c's statements and its connection, which the pool then
// drops rather than reuses: the server ends the session, and with it every
// lock the session held.
func (c *conn) discard() {
	for _, s := range c.st {
		_ = s.Close()
	}
	clear(c.st)
	_ = c.sc.Raw(func(any) error { return driver.ErrBadConn })
}

// exec runs q on c (locked), prepared once per connection, bounded by the
// Provider's timeout whatever ctx says: the caller's ctx must never cancel
// a statement on a shared connection (the driver closes the socket to
// cancel one). A statement that overruns the bound breaks the connection,
// which is then failed.
func (c *conn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, cancel := c.p.opCtx(ctx)
	defer cancel()
	return c.execOn(ctx, q, args...)
}

// execOn runs q on c (locked) under ctx as it is.
func (c *conn) execOn(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := c.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// queryRowOn runs the query q, which returns one row, on c (locked) under
// ctx as it is.
func (c *conn) queryRowOn(ctx context.Context, q string, args ...any) scanner {
	s, err := c.prepared(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return s.QueryRowContext(ctx, args...)
}

// queryRow is queryRowOn bounded as exec is; the caller scans at once.
func (c *conn) queryRow(ctx context.Context, q string, args ...any) (scanner, context.CancelFunc) {
	ctx, cancel := c.p.opCtx(ctx)
	return c.queryRowOn(ctx, q, args...), cancel
}

// scanner is a *sql.Row, or the error of preparing its statement.
type scanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// prepared returns q prepared on c (locked), preparing it the first time.
func (c *conn) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := c.st[q]; ok {
		return s, nil
	}
	s, err := c.sc.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.st[q] = s
	return s, nil
}

// addConnLocked dials a new connection with p.mu released and adds it.
// Called with p.mu held; returns with it held.
func (p *Provider) addConnLocked(ctx context.Context, waiting bool) (*conn, error) {
	p.dialing++
	if waiting {
		p.dialingWaits++
	}
	p.mu.Unlock()
	c, err := p.dial(ctx)
	p.mu.Lock()
	p.dialing--
	if waiting {
		p.dialingWaits--
	}
	if err != nil {
		p.signalLocked()
		return nil, err
	}
	if p.closed {
		p.signalLocked()
		c.discard()
		return nil, errClosed
	}
	c.waiting = waiting
	p.conns = append(p.conns, c)
	p.signalLocked()
	return c, nil
}

var (
	errLocalBusy = errors.New("held by this process")
	errNoConn    = errors.New("every connection holds this lock already")
)

// sharedConn returns, locked, a connection fit to try lock on: not
// waiting, and not holding lock already (GET_LOCK is reentrant per
// session; ours are not). With sem set, any connection will do: the caller
// skips the slots it holds. A lock that a grant of this process holds gives
// errLocalBusy without I/O.
func (p *Provider) sharedConn(ctx context.Context, lock string, sem bool) (*conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errClosed
		}
		var pick *conn
		for _, c := range p.conns {
			if c.waiting || c.broken {
				continue
			}
			if !sem && c.held[lock] != nil {
				p.mu.Unlock()
				return nil, errLocalBusy
			}
			// Prefer connections that already hold locks: it keeps empty
			// ones free for blocking waits.
			if pick == nil || (len(pick.held) == 0 && len(c.held) > 0) {
				pick = c
			}
		}
		if pick == nil {
			if p.dialing == 0 && len(p.conns) >= p.opts.maxConns {
				p.mu.Unlock()
				return nil, errNoConn
			}
			// Wait for a connection being dialed rather than dial one each
			// when many acquires start at once.
			if p.dialing > 0 {
				ch := p.changed
				p.mu.Unlock()
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return nil, kit.NotAcquired(ctx)
				}
			}
			c, err := p.addConnLocked(ctx, false)
			if err != nil {
				p.mu.Unlock()
				return nil, err
			}
			pick = c
		}
		p.mu.Unlock()

		pick.mu.Lock()
		p.mu.Lock()
		ok := !pick.broken && !pick.waiting && (sem || pick.held[lock] == nil)
		p.mu.Unlock()
		if ok {
			return pick, nil
		}
		pick.mu.Unlock()
	}
}

// emptyConn reserves, locked and marked waiting, a connection that holds
// nothing, dialing one if there is room. It returns nil when every
// connection is busy and there is no room for another.
func (p *Provider) emptyConn(ctx context.Context) (*conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errClosed
		}
		var pick *conn
		waiting := p.dialingWaits
		for _, c := range p.conns {
			if c.waiting {
				waiting++
			} else if pick == nil && !c.broken && len(c.held) == 0 {
				pick = c
			}
		}
		// Waits leave at least one connection to tries and releases, so a
		// TryAcquire never queues behind them.
		if waiting >= p.opts.maxConns-1 {
			p.mu.Unlock()
			return nil, nil
		}
		if pick != nil {
			pick.waiting = true
		} else {
			if len(p.conns)+p.dialing >= p.opts.maxConns {
				p.mu.Unlock()
				return nil, nil
			}
			c, err := p.addConnLocked(ctx, true)
			if err != nil {
				p.mu.Unlock()
				return nil, err
			}
			pick = c
		}
		p.mu.Unlock()

		pick.mu.Lock()
		p.mu.Lock()
		ok := !pick.broken && len(pick.held) == 0
		if !ok {
			pick.waiting = false
		}
		p.mu.Unlock()
		if ok {
			return pick, nil
		}
		pick.mu.Unlock()
	}
}

// doneWaiting ends a reservation made by emptyConn and unlocks c.
func (c *conn) doneWaiting() {
	p := c.p
	p.mu.Lock()
	c.waiting = false
	p.signalLocked()
	p.mu.Unlock()
	c.mu.Unlock()
	p.notify.NotifyAll()
}

// addGrant records a lock granted on c. Called with c.mu held.
func (c *conn) addGrant(g *grant) {
	p := c.p
	p.mu.Lock()
	c.held[g.lock] = g
	c.waiting = false
	if g.handoff {
		p.hand.SetHolder(g.row, g)
	}
	start := !p.keepStarted && !p.closed
	p.keepStarted = p.keepStarted || start
	p.mu.Unlock()
	if start {
		go p.keepalive()
	}
}

// dropGrant forgets a lock of c. Called with c.mu held.
func (c *conn) dropGrant(g *grant) {
	p := c.p
	p.mu.Lock()
	if c.held[g.lock] == g {
		delete(c.held, g.lock)
	}
	p.hand.DropHolder(g.row, g)
	empty := len(c.held) == 0
	if empty {
		p.signalLocked()
	}
	p.mu.Unlock()
	p.notify.Notify(g.row)
	if empty {
		p.notify.NotifyAll()
	}
}

// fail takes c out of service after err: its connection is discarded
// (which makes the server end the session and free its locks) and every
// handle on it is lost. Called with c.mu held.
func (c *conn) fail(err error) {
	p := c.p
	p.mu.Lock()
	if c.broken {
		p.mu.Unlock()
		return
	}
	c.broken = true
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	lost := make([]*grant, 0, len(c.held))
	for _, g := range c.held {
		lost = append(lost, g)
		p.hand.DropHolder(g.row, g)
	}
	clear(c.held)
	p.signalLocked()
	p.mu.Unlock()

	c.discard()
	why := fmt.Errorf("%w: connection failed: %w", core.ErrLockLost, err)
	if len(lost) > 0 {
		p.opts.log.Warn("mysqllock: connection failed; its locks are lost", "locks", len(lost), "conn", c.id, "err", err)
	}
	for _, g := range lost {
		g.h.Lose(why)
		p.notify.Notify(g.row)
	}
	p.notify.NotifyAll()
}

// isBroken reports whether c is out of service.
func (c *conn) isBroken() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.broken
}

// connFailed reports whether err left c unusable, as opposed to an error
// the server reported on a healthy session.
func connFailed(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return true // the driver's: a broken socket, a closed connection
	}
	switch me.Number {
	case 1053, 1927: // server shutdown in progress, connection killed
		return true
	}
	return false
}

// unlockIfHeld is the re-check after a grant statement failed on a healthy
// c (locked): the server may have granted one of locks before the error. It
// releases those this session holds; if even that fails, c is failed,
// which frees them too. It reports whether c is still in service.
func (c *conn) unlockIfHeld(ctx context.Context, locks []string) bool {
	args := make([]any, 0, 2*len(locks))
	for _, l := range locks {
		args = append(args, l, l)
	}
	if _, err := c.exec(ctx, unlockIfHeld(len(locks)), args...); err != nil {
		c.fail(fmt.Errorf("re-check after a failed grant statement: %w", err))
		return false
	}
	return true
}

// keepalive pings, every keepalive period, each connection that holds
// locks: one round trip per connection however many locks it holds. A
// failed ping fails the connection, which loses every handle on it. It runs
// from the first grant until Close.
func (p *Provider) keepalive() {
	defer close(p.keepDone)
	t := time.NewTicker(p.opts.keepalive)
	defer t.Stop()
	for {
		select {
		case <-p.keepStop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var due []*conn
		for _, c := range p.conns {
			if len(c.held) > 0 && !c.broken {
				due = append(due, c)
			}
		}
		p.mu.Unlock()
		for _, c := range due {
			c.ping(p.opts.keepalive)
		}
	}
}

// ping checks c in one round trip (COM_PING) and fails it if the ping
// fails or takes longer than d. A connection busy with another statement
// for all of d is skipped: that statement reports its own failure.
func (c *conn) ping(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case c.mu <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer c.mu.Unlock()
	if c.isBroken() {
		return
	}
	// A server that stopped answering (a cut network sends no reset) fails
	// the ping at the deadline: the driver then closes the socket.
	if err := c.sc.PingContext(ctx); err != nil {
		c.fail(fmt.Errorf("keepalive: %w", err))
	}
}
