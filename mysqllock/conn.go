package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/go-sql-driver/mysql"
)

// The Provider's locks live on a few connections pinned from its *sql.DB
// (kit.Sessions: which connection a statement runs on, the record of the
// grants, keepalive, loss). A conn is one of them; a grant is one lock
// held on one, keyed by its server lock name, its Wake the counter row
// (also the lock's Notifier key).
type (
	conn  = kit.Session[string, *session, struct{}]
	grant = kit.Grant[string, *session, struct{}]
)

// session is the pinned connection of a conn.
type session struct {
	p  *Provider
	sc *sql.Conn
	id uint64    // the session's CONNECTION_ID(), what IS_USED_LOCK reports
	st stmtCache // guarded by the conn's lock
	nc net.Conn  // the driver's socket, or nil (netconn.go)
	// deadline is nc's deadline, guarded by the conn's lock.
	deadline time.Time

	mu      sync.Mutex
	abort   context.CancelFunc // set during a blocking wait: breaks its socket
	aborted bool               // Abort was called: no wait may start
}

// dial pins a connection of the pool and sets its session up.
func (p *Provider) dial(ctx context.Context) (*session, error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	sc, err := p.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &session{p: p, sc: sc, st: stmtCache{}}
	if _, err := sc.ExecContext(ctx, sessionSQL); err != nil {
		c.Close()
		return nil, err
	}
	var me *mysql.MySQLError
	if _, err := sc.ExecContext(ctx, statementTimeoutSQL); err != nil && !(errors.As(err, &me) && me.Number == 1193) {
		c.Close() // 1193: unknown variable, a MySQL server
		return nil, err
	}
	if err := sc.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&c.id); err != nil {
		c.Close()
		return nil, err
	}
	c.nc = netConnOf(ctx, sc)
	return c, nil
}

// Close closes c's statements and its connection, which the pool then
// drops rather than reuses: the server ends the session, and with it every
// lock the session held.
func (c *session) Close() {
	if c.nc != nil {
		// The statements' close goes out on the socket, whose deadline
		// may have passed while the connection idled.
		c.setDeadline(time.Now().Add(kit.CleanupTimeout))
	}
	c.closeStmts()
}

// Ping checks c (locked) in one round trip (COM_PING). A server that
// stopped answering (a cut network sends no reset) fails it at the
// deadline: the socket's, or the context's when c has no socket, after
// which the driver closes it.
func (c *session) Ping(deadline time.Time) error {
	if c.nc != nil {
		c.setDeadline(deadline)
		return c.sc.PingContext(context.Background())
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return c.sc.PingContext(ctx)
}

// Abort breaks the socket of a blocking wait on c, or makes the next one
// fail at once.
func (c *session) Abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted = true
	if c.abort != nil {
		c.abort()
	}
}

// waiting sets (or, with nil, clears) what Abort calls; false when Abort
// came first.
func (c *session) waiting(abort context.CancelFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abort = abort
	return !c.aborted || abort == nil
}

// connFailed reports whether err left a connection unusable, as opposed to
// an error the server reported on a healthy session.
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

// contended reports whether the server gave err up as the loser of a
// contention it tells the client to retry: a deadlock victim (InnoDB's
// 1213, MySQL's user-lock deadlock 3058) or a row lock wait that timed out
// (1205). The statement was undone but its user locks were not, so the
// caller re-checks them (unlockIfHeld) and reports the lock busy.
func contended(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1205, 1213, 3058:
		return true
	}
	return false
}

// unlockIfHeld is the re-check after a grant statement failed on a healthy
// c (locked): the server may have granted one of locks before the error. It
// releases those this session holds; if even that fails, c is failed,
// which frees them too. It reports whether c is still in service.
func unlockIfHeld(ctx context.Context, c *conn, locks []string) bool {
	args := make([]any, 0, 2*len(locks))
	for _, l := range locks {
		args = append(args, l, l)
	}
	if _, err := c.Conn.exec(ctx, unlockIfHeldSQL(len(locks)), args...); err != nil {
		c.Fail(fmt.Errorf("re-check after a failed grant statement: %w", err))
		return false
	}
	return true
}

// unlock releases g on its connection (locked): the driver's Unlock.
func (p *Provider) unlock(ctx context.Context, g *grant) error {
	_, err := g.Session.Conn.exec(ctx, unlockSQL, g.Key)
	return err
}
