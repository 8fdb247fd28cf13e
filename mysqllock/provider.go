package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const backend = "mysql"

var errClosed = errors.New("mysqllock: provider closed")

// Provider makes mutexes and semaphores on MySQL or MariaDB user-level
// locks (GET_LOCK). It is safe for concurrent use. Close it to release
// every lock it holds and stop its goroutines.
type Provider struct {
	probe  *kit.Probe // nil without observers or a logger
	db     *sql.DB
	owned  bool // Open made db: Close closes it
	opts   options
	sql    statements
	notify kit.Notifier

	fenceSetup   setup // the fence sequence or table exists
	membersSetup setup // the members table exists
	seq          seqBlocks

	mu      sync.Mutex
	conns   []*conn
	dialing int // connections being dialed
	// dialingWaits counts those of them dialed for a blocking wait.
	dialingWaits int
	closed       bool
	changed      chan struct{} // closed and replaced whenever a connection frees up
	// hand lines up local waiters and hands Mutex grants on (handoff.go).
	hand kit.Handoffs[*grant, *kit.BaseHandle]

	// The keepalive loop runs from the first grant until Close.
	keepStarted bool
	keepStop    chan struct{}
	keepDone    chan struct{}
	// waits tracks the goroutines that KILL QUERY an abandoned wait.
	waits sync.WaitGroup
}

var (
	_ core.Provider   = (*Provider)(nil)
	_ core.Membership = (*Provider)(nil)
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
	o := defaults()
	for _, opt := range opts {
		if opt == nil {
			return nil, kit.Invalid("mysqllock: nil option")
		}
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if max := db.Stats().MaxOpenConnections; max > 0 && max < o.maxConns+2 {
		return nil, kit.Invalid("mysqllock: the DB's max open connections %d leave no room beside %d pinned ones: raise it to at least %d or lower WithMaxConns",
			max, o.maxConns, o.maxConns+2)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{
		db:    db,
		opts:  o,
		probe: kit.NewProbe(backend, o.log, o.observers...),
		sql: statements{fence: quoteIdent(o.fenceTable), seq: o.fenceSeq, mark: quoteIdent(o.fenceTable + markSuffix),
			members: quoteIdent(o.membersTable)},
		changed:  make(chan struct{}),
		keepStop: make(chan struct{}),
		keepDone: make(chan struct{}),
	}
	p.hand.Limits = o.handoff
	p.hand.Wake = p.notify.Notify
	return p, nil
}

// Close releases every lock the Provider holds (by closing its pinned
// connections: the server frees a session's locks when it ends), cancels
// every open handle's context with core.ErrLockLost, interrupts blocking
// waits and stops the keepalive goroutine. Acquires after Close fail. It
// does not close db.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.conns
	p.conns = nil
	for _, c := range conns {
		if c.abort != nil {
			// A blocking wait holds c.mu until the server answers:
			// breaking its socket ends the wait at once.
			c.abort()
		}
	}
	p.signalLocked()
	keeping := p.keepStarted
	p.mu.Unlock()

	close(p.keepStop)
	if keeping {
		<-p.keepDone
	}
	p.notify.NotifyAll()
	for _, c := range conns {
		c.mu.Lock()
		c.fail(errClosed)
		c.mu.Unlock()
	}
	p.waits.Wait()
	if p.owned {
		return p.db.Close()
	}
	return nil
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

// signalLocked wakes everyone waiting for a connection to free up.
func (p *Provider) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// setup is a schema step a Provider runs once: again after a failure, never
// after a success. Concurrent callers wait for the one running it.
type setup struct {
	mu   sync.Mutex
	done bool
}

// run runs f, bounded by timeout whatever ctx's own deadline, unless it
// already succeeded.
func (s *setup) run(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		return err
	}
	s.done = true
	return nil
}

// opCtx bounds a statement on a shared connection: the caller's ctx bounds
// only waiting, never a statement whose cancellation would break a
// connection other locks live on.
func (p *Provider) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.opts.timeout)
}
