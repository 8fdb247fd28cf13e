package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const backend = "mysql"

var errClosed = errors.New("mysqllock: provider closed")

// Provider makes mutexes and semaphores on MySQL or MariaDB user-level
// locks (GET_LOCK). It is safe for concurrent use. Close it to release
// every lock it holds and stop its goroutines.
type Provider struct {
	probe *kit.Probe // nil without observers or a logger
	db    *sql.DB
	owned bool // Open made db: Close closes it
	opts  options
	log   *slog.Logger
	sql   statements
	// sess holds the locks on pinned connections (conn.go).
	sess *kit.Sessions[string, *session, struct{}]

	fenceSetup   kit.Setup   // the fence sequence or table exists
	membersSetup kit.Setup   // the members table exists
	memberStmts  memberStmts // prepared by membersSetup
	seq          seqBlocks

	// waits tracks the goroutines that KILL QUERY an abandoned wait.
	waits sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var (
	_ core.Provider   = (*Provider)(nil)
	_ core.Membership = (*Provider)(nil)
	_ core.Announcer  = (*Provider)(nil)
)

// New returns a Provider on db, a *sql.DB of github.com/go-sql-driver/mysql
// (or a driver that speaks the same SQL). Locks live on a few connections
// the Provider pins from db (WithMaxConns bounds them); db's other
// connections serve the fence and membership tables and KILL QUERY. New
// does no I/O. A nil db, a db whose SetMaxOpenConns leaves no connection
// beside the pinned ones, or a bad option is an error matching
// core.ErrInvalidArgument.
func New(db *sql.DB, opts ...Option) (*Provider, error) {
	if db == nil {
		return nil, kit.Invalid("mysqllock: nil *sql.DB")
	}
	o, err := kit.Configure("mysqllock", defaults(), opts, kit.SessionRules{Ident: validIdent, MaxIdentity: MaxIdentity, Check: checkSequence})
	if err != nil {
		return nil, err
	}
	if max := db.Stats().MaxOpenConnections; max > 0 && max < o.MaxConns+2 {
		return nil, kit.Invalid("mysqllock: the DB's max open connections %d leave no room beside %d pinned ones: raise it to at least %d or lower WithMaxConns",
			max, o.MaxConns, o.MaxConns+2)
	}
	p := &Provider{
		db:    db,
		opts:  o,
		log:   o.Log,
		probe: kit.NewProbe(backend, o.Log, o.Observers...),
		sql: statements{fence: quoteIdent(o.FenceTable), seq: o.FenceSeq, mark: quoteIdent(o.FenceTable + markSuffix),
			members: quoteIdent(o.MembersTable)},
	}
	p.sql.prepare()
	p.sess = kit.NewSessions(backend, o, kit.SessionDriver[string, *session, struct{}]{
		Dial: p.dial, Unlock: p.unlock, Draw: p.draw, Verify: p.verify, Closed: errClosed,
	})
	return p, nil
}

// Close releases every lock the Provider holds (by closing its pinned
// connections: the server frees a session's locks when it ends), cancels
// every open handle's context with core.ErrLockLost, interrupts blocking
// waits, stops the keepalive goroutine and closes the membership
// statements it prepared on db. Acquires and membership calls after Close
// fail. It does not close db.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.sess.Close()
		p.waits.Wait()
		p.memberStmts.close()
		if p.owned {
			p.closeErr = p.db.Close()
		}
	})
	return p.closeErr
}

// Mutex returns the exclusive lock of name: the user-level lock
// GET_LOCK("dl/m/" + an encoding of name). A bad name is reported by the
// acquire calls, before any I/O.
//
// TryAcquire is one round trip on a shared connection: the lock and the
// fence bump in one statement. Acquire tries the same way, and when the
// lock is busy waits in the server's queue on a connection of its own (one
// more statement, which returns when the lock is granted), or, while
// another handle of this Provider holds it, waits for that release to hand
// it over locally (WithLocalHandoff). ctx bounds only the wait; a grant
// that races its end is released before Acquire returns an error matching
// core.ErrNotAcquired and ctx.Err(). Release is one round trip (none or one
// when it hands over); after a lost connection it returns nil at once. A
// busy lock gives an error matching core.ErrNotAcquired; a server error or
// a dead server gives the driver's error, wrapped in a *core.Error. With
// WithFenceTable the Locker implements core.Inspector; with the default
// sequence it does not, so that callers such as election see at once that
// the holder cannot be told.
func (p *Provider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if p.sql.seq {
		return p.probe.Mutex(struct{ core.Locker }{p.newLocker(name)})
	}
	return p.probe.Mutex(p.newLocker(name))
}

// RWMutex is not supported: both acquire calls fail with an error matching
// core.ErrUnsupported. GET_LOCK has no shared mode, and a reader-writer
// lock built from exclusive locks (a writer's gate plus one lock per
// reader slot) would cost a writer a lock per slot on every grant and
// bound the readers by the slot count. Use a Mutex, or a backend with a
// shared mode (pglock).
func (p *Provider) RWMutex(name string) core.RWLocker {
	return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name,
		fmt.Errorf("%w: GET_LOCK has no shared mode", core.ErrUnsupported)))
}

// Semaphore returns the semaphore of name admitting max holders (1 to
// MaxSemaphore): max user-level locks, one per slot; a holder holds one.
// A bad name or max is reported by the acquire calls.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 || max > MaxSemaphore {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, kit.Invalid("semaphore max %d not in [1, %d]", max, MaxSemaphore)))
	}
	return p.probe.Semaphore(p.newSemaphore(name, max))
}

// opCtx bounds a statement on a shared connection: the caller's ctx bounds
// only waiting, never a statement whose cancellation would break a
// connection other locks live on.
func (p *Provider) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.opts.Timeout)
}
