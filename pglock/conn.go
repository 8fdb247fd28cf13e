package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// The Provider's locks live on a few connections it opens itself
// (kit.Sessions: which connection a statement runs on, the record of the
// grants, keepalive, loss). A conn is one of them; a grant is one lock
// held on one, keyed by its advisory key, its Wake the lock's counter row
// (also its Notifier key).
type (
	conn  = kit.Session[Key, *session, lockInfo]
	grant = kit.Grant[Key, *session, lockInfo]
)

// lockInfo is what pglock records with a grant besides its key.
type lockInfo struct {
	mode lockMode
	// notify: the release also sends the grant's Wake on releaseChannel,
	// for waiters in other processes (semaphores, whose waiters cannot
	// queue on the server).
	notify bool
}

// session is the connection of a conn.
type session struct {
	p  *Provider
	pc *pgx.Conn
}

// dial opens a connection with the pool's config. Cancelling a statement
// on it sends a cancel request (and only after a grace period breaks the
// socket), so a cancelled wait leaves the connection usable.
func (p *Provider) dial(ctx context.Context) (*session, error) {
	return p.dialWith(ctx, func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
	})
}

func (p *Provider) dialWith(ctx context.Context, handler func(*pgconn.PgConn) ctxwatch.Handler) (*session, error) {
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
	return &session{p: p, pc: pc}, nil
}

// Close closes c, which makes the server free every lock of its session.
func (c *session) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
	defer cancel()
	_ = c.pc.Close(ctx)
}

// Abort closes c's socket under a statement in progress.
func (c *session) Abort() { _ = c.pc.PgConn().Conn().Close() }

// Ping checks c in one round trip. A socket deadline, not a context: a
// server that stopped answering (a cut network sends no reset) fails the
// ping at the deadline, with no cancel request to wait for.
func (c *session) Ping(deadline time.Time) error {
	nc := c.pc.PgConn().Conn()
	_ = nc.SetDeadline(deadline)
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	return c.pc.Ping(context.Background())
}

// bound bounds the next statements on c (locked) by the Provider's
// timeout and returns the context to run them with and a func that lifts
// the bound. The bound is a socket deadline rather than a context deadline:
// the caller's ctx must never cancel a statement on a shared connection,
// and pgx watches a cancellable context with a goroutine per statement. A
// statement that overruns the deadline breaks the connection, which is
// then failed.
func (c *session) bound(ctx context.Context) (context.Context, func()) {
	nc := c.pc.PgConn().Conn()
	_ = nc.SetDeadline(time.Now().Add(c.p.opts.Timeout))
	return context.WithoutCancel(ctx), func() { _ = nc.SetDeadline(time.Time{}) }
}

// connFailed reports whether err left c unusable, as opposed to an error
// the server reported on a healthy session or a context that ended before
// the statement was sent.
func (c *session) connFailed(err error) bool {
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
func unlockIfHeld(ctx context.Context, c *conn, k Key, m lockMode) bool {
	rctx, unbound := c.Conn.bound(ctx)
	q, args := c.Conn.p.sql.unlockIfHeld(k, m)
	var was bool
	err := c.Conn.pc.QueryRow(rctx, q, args...).Scan(&was)
	unbound()
	if err != nil {
		c.Fail(fmt.Errorf("re-check after a failed lock statement: %w", err))
		return false
	}
	return true
}

// unlock releases g on its connection (locked): the kit.SessionDriver's
// Unlock. A semaphore slot's release also notifies the other processes.
func (p *Provider) unlock(ctx context.Context, g *grant) error {
	q, args := p.sql.unlock(g.Key, g.Info.mode)
	if g.Info.notify {
		q, args = p.sql.unlockNotify(g.Key, g.Wake)
	}
	c := g.Session.Conn
	octx, unbound := c.bound(ctx)
	defer unbound()
	var ok bool
	return c.pc.QueryRow(octx, q, args...).Scan(&ok)
}
