package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// conn is one long-lived connection of a Provider. It either holds any
// number of locks and serves try-locks and releases (shared), or runs one
// blocking wait (waiting), which it only starts while it holds nothing, so a
// release never queues behind a wait.
type conn struct {
	p  *Provider
	pc *pgx.Conn
	mu chanMutex // one statement at a time; taken before p.mu, never after

	// Guarded by p.mu; held changes only under mu too.
	held    map[Key]*grant
	waiting bool
	broken  bool
}

// chanMutex is a mutex (a one-slot channel), so that taking it can also
// be abandoned when a context ends.
type chanMutex chan struct{}

func (m chanMutex) Lock()   { m <- struct{}{} }
func (m chanMutex) Unlock() { <-m }

// grant is one lock held on a conn.
type grant struct {
	c    *conn
	key  Key
	mode lockMode
	wake string // notifier key of the lock
	// notify: the release also sends wake on releaseChannel, for waiters in
	// other processes (semaphores, whose waiters cannot queue on the server).
	notify bool
	name   string // for errors
	h      *kit.BaseHandle

	// Local handoff (handoff.go). handoff: the grant may be handed on; run:
	// its place in a run of handoffs.
	handoff bool
	run     kit.Run
}

// dial opens a connection with the pool's config. Cancelling a statement
// on it sends a cancel request (and only after a grace period breaks the
// socket), so a cancelled wait leaves the connection usable.
func (p *Provider) dial(ctx context.Context) (*conn, error) {
	return p.dialWith(ctx, func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
	})
}

func (p *Provider) dialWith(ctx context.Context, handler func(*pgconn.PgConn) ctxwatch.Handler) (*conn, error) {
	pcfg := p.pool.Config()
	cfg := pcfg.ConnConfig.Copy()
	cfg.BuildContextWatcherHandler = handler
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	if pcfg.BeforeConnect != nil {
		if err := pcfg.BeforeConnect(ctx, cfg); err != nil {
			return nil, err
		}
	}
	pc, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if pcfg.AfterConnect != nil {
		if err := pcfg.AfterConnect(ctx, pc); err != nil {
			pc.Close(ctx)
			return nil, err
		}
	}
	// Timeouts a role or the pool's config may set would end blocking
	// waits, fail a fence upsert after its lock was granted, or close a
	// connection that holds locks while it idles between keepalives. The
	// Provider bounds its statements itself.
	if _, err := pc.Exec(ctx, resetTimeoutsSQL); err != nil {
		pc.Close(ctx)
		return nil, err
	}
	return &conn{p: p, pc: pc, mu: make(chanMutex, 1), held: make(map[Key]*grant)}, nil
}

// bound bounds the next statements on c (locked) by the Provider's
// timeout and returns the context to run them with and a func that lifts
// the bound. The bound is a socket deadline rather than a context deadline:
// the caller's ctx must never cancel a statement on a shared connection,
// and pgx watches a cancellable context with a goroutine per statement. A
// statement that overruns the deadline breaks the connection, which is
// then failed.
func (c *conn) bound(ctx context.Context) (context.Context, func()) {
	nc := c.pc.PgConn().Conn()
	_ = nc.SetDeadline(time.Now().Add(c.p.opts.timeout))
	return context.WithoutCancel(ctx), func() { _ = nc.SetDeadline(time.Time{}) }
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
		c.pc.Close(context.Background())
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

// sharedConn returns, locked, a connection fit to try key on: not waiting,
// and not already holding key (PostgreSQL advisory locks are reentrant per
// session, ours are not). With sem set, any connection will do: the caller
// skips the slots it holds. When a lock of this process already excludes
// the request it returns errLocalBusy without I/O.
func (p *Provider) sharedConn(ctx context.Context, key Key, mode lockMode, sem bool) (*conn, error) {
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
			if !sem {
				if g := c.held[key]; g != nil {
					if mode == exclusive || g.mode == exclusive {
						p.mu.Unlock()
						return nil, errLocalBusy
					}
					continue
				}
			}
			// Prefer connections that already hold locks: it keeps empty
			// ones free for blocking waits.
			if pick == nil || (len(pick.held) == 0 && len(c.held) > 0) {
				pick = c
			}
		}
		if pick == nil {
			if p.dialing == 0 && len(p.conns) >= p.opts.maxConns {
				// Only readers of this very name can fill every
				// connection (waits always leave one free).
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
		ok := !pick.broken && !pick.waiting && (sem || pick.held[key] == nil)
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
		// Waits leave at least one connection to try-locks and releases,
		// so a TryAcquire never queues behind them.
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
	c.held[g.key] = g
	if g.handoff {
		p.hand.SetHolder(g.wake, g)
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
	if c.held[g.key] == g {
		delete(c.held, g.key)
	}
	p.hand.DropHolder(g.wake, g)
	empty := len(c.held) == 0
	if empty {
		p.signalLocked()
	}
	p.mu.Unlock()
	p.notify.Notify(g.wake)
	if empty {
		p.notify.NotifyAll()
	}
}

// fail takes c out of service after err: it is closed (which makes the
// server free every lock of its session) and every handle on it is lost.
// Called with c.mu held.
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
		p.hand.DropHolder(g.wake, g)
	}
	clear(c.held)
	p.signalLocked()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
	c.pc.Close(ctx)
	cancel()
	why := fmt.Errorf("%w: connection failed: %w", core.ErrLockLost, err)
	if len(lost) > 0 {
		p.opts.log.Warn("distlock: connection failed; its locks are lost", "backend", backend, "locks", len(lost), "err", err)
	}
	for _, g := range lost {
		g.h.Lose(why)
		p.notify.Notify(g.wake)
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
// the server reported on a healthy session or a context that ended before
// the statement was sent.
func (c *conn) connFailed(err error) bool {
	if c.pc.IsClosed() {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC"
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// unlockIfHeld is the re-check after a lock statement failed on a healthy
// c (locked): the server may have granted the lock before the error (a
// wait cancelled at the moment of the grant, a fence upsert that failed).
// It releases the lock if this session holds it; if even that fails, c is
// failed, which frees it too. It reports whether c is still in service.
func (c *conn) unlockIfHeld(ctx context.Context, k Key, m lockMode) bool {
	rctx, unbound := c.bound(ctx)
	q, args := c.p.sql.unlockIfHeld(k, m)
	var was bool
	err := c.pc.QueryRow(rctx, q, args...).Scan(&was)
	unbound()
	if err != nil {
		c.fail(fmt.Errorf("re-check after a failed lock statement: %w", err))
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

// ping checks c in one round trip and fails it if the ping fails or takes
// longer than d. A connection busy with another statement for all of d is
// skipped: that statement reports its own failure. The ping's d starts once
// it has the connection, so time spent waiting behind our own statements
// never counts against a healthy server.
func (c *conn) ping(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case c.mu <- struct{}{}:
	case <-t.C:
		return
	}
	defer c.mu.Unlock()
	if c.isBroken() {
		return
	}
	deadline := time.Now().Add(d)
	// A socket deadline, not a context: a server that stopped answering
	// (a cut network sends no reset) fails the ping at the deadline, with
	// no cancel request to wait for.
	nc := c.pc.PgConn().Conn()
	_ = nc.SetDeadline(deadline)
	err := c.pc.Ping(context.Background())
	_ = nc.SetDeadline(time.Time{})
	if err != nil {
		c.fail(fmt.Errorf("keepalive: %w", err))
	}
}
