package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const backend = "postgres"

var errClosed = errors.New("pglock: provider closed")

// Provider makes mutexes, reader-writer locks and semaphores on PostgreSQL
// session advisory locks. It is safe for concurrent use. Close it to release
// every lock it holds and stop its goroutines.
type Provider struct {
	pool  *pgxpool.Pool
	opts  options
	log   *slog.Logger
	sql   statements
	probe *kit.Probe // nil without observers
	// sess holds the locks on the Provider's connections (conn.go).
	sess *kit.Sessions[Key, *session, lockInfo]

	fenceSetup   kit.Setup // the fence sequence or table exists
	membersSetup kit.Setup // the members table exists
	// noValue: membersSetup found the members table without the value
	// column and this user may not add it. Set only inside membersSetup,
	// read after it.
	noValue atomic.Bool

	// The release listener runs from the first semaphore wait until Close.
	mu         sync.Mutex
	closed     bool
	listening  bool
	listenStop context.CancelFunc
	listenDone chan struct{}
	semBackoff kit.Backoff
	// listenReady is closed once the listener first listens (for tests).
	listenReady     chan struct{}
	listenReadyOnce sync.Once

	owned bool // Open made the pool: Close closes it
}

var _ core.Provider = (*Provider)(nil)
var _ core.Membership = (*Provider)(nil)
var _ core.Heartbeater = (*Provider)(nil)
var _ core.Announcer = (*Provider)(nil)

// New returns a Provider on pool. The pool serves the fence and membership
// tables; the locks themselves live on a few connections the Provider opens
// with the pool's connection config (running its BeforeConnect and
// AfterConnect hooks), so they do not take connections from the pool. New
// does no I/O. A nil pool or a bad option is an error matching
// core.ErrInvalidArgument.
func New(pool *pgxpool.Pool, opts ...Option) (*Provider, error) {
	if pool == nil {
		return nil, kit.Invalid("pglock: nil pool")
	}
	o, err := kit.Configure("pglock", kit.DefaultSessionConfig(DefaultFenceSequence, DefaultMembersTable), opts,
		kit.SessionRules{Ident: validIdent, MaxIdentity: MaxIdentity})
	if err != nil {
		return nil, err
	}
	p := &Provider{
		pool:        pool,
		opts:        o,
		log:         o.Log,
		sql:         statements{fence: quoteIdent(o.FenceTable), seq: o.FenceSeq},
		listenDone:  make(chan struct{}),
		listenReady: make(chan struct{}),
		semBackoff:  semBackoff,
		probe:       kit.NewProbe(backend, o.Log, o.Observers...),
	}
	p.sess = kit.NewSessions(backend, o, kit.SessionDriver[Key, *session, lockInfo]{
		Dial: p.dial, Unlock: p.unlock, Draw: p.draw, Verify: p.verify, Closed: errClosed,
	})
	return p, nil
}

// Close releases every lock the Provider holds (by closing its connections:
// the server frees a session's advisory locks when it ends), cancels every
// open handle's context with core.ErrLockLost, interrupts blocking waits and
// stops the keepalive goroutine. Acquires after Close fail. It closes the
// pool only when Open made it.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	listening := p.listening
	p.mu.Unlock()

	p.sess.Close()
	if listening {
		p.listenStop()
		<-p.listenDone
	}
	if p.owned {
		p.pool.Close()
	}
	return nil
}

// Mutex returns the exclusive lock of name (key KeyOf(name)). A bad name is
// reported by the acquire calls, before any I/O.
//
// TryAcquire is one round trip on a shared connection: the try-lock and the
// fence bump in one statement. Acquire tries the same way, and when the lock
// is busy waits in the server's queue on a connection of its own (one more
// statement, which returns when the lock is granted), or, while another
// handle of this Provider holds it, waits for that release to hand it over
// locally (WithLocalHandoff). ctx bounds only the wait; a grant that races
// its end is released before Acquire returns an error matching
// core.ErrNotAcquired and ctx.Err(). Release is one round trip (none or one
// when it hands over); after a lost connection it returns nil at once. A busy lock gives an
// error matching core.ErrNotAcquired; a server error or a dead server gives
// the driver's error, wrapped in a *core.Error.
func (p *Provider) Mutex(name string) core.Locker {
	k, err := KeyOf(name)
	if err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.inspectable(p.newLocker(name, k, exclusive))
}

// MutexKey returns the exclusive lock of an explicit key: the lock that
// pg_advisory_lock(key) takes in any other client.
func (p *Provider) MutexKey(k Key) core.Locker {
	return p.inspectable(p.newLocker(k.String(), k, exclusive))
}

// inspectable returns l, which implements core.Inspector when the Provider
// records holders (WithFenceTable), and l without that method otherwise, so
// that callers such as election see at once that the holder cannot be told.
func (p *Provider) inspectable(l *locker) core.Locker {
	if p.sql.seq {
		return p.probe.Mutex(struct{ core.Locker }{l})
	}
	return p.probe.Mutex(l)
}

// inspectableRW is inspectable for a reader-writer lock.
func (p *Provider) inspectableRW(l *rwLocker) core.RWLocker {
	if p.sql.seq {
		return p.probe.RWMutex(struct{ core.RWLocker }{l})
	}
	return p.probe.RWMutex(l)
}

// RWMutex returns the reader-writer lock of name. Its key is derived from
// KeyOf(name) by hashing, so it is a different lock from Mutex(name).
func (p *Provider) RWMutex(name string) core.RWLocker {
	k, err := KeyOf(name)
	if err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.inspectableRW(p.newRWLocker(name, derive("rw", k, 0)))
}

// RWMutexKey returns the reader-writer lock on an explicit key: its write
// side is pg_advisory_lock(key), its read side pg_advisory_lock_shared(key),
// so it is the same lock as MutexKey(k) on the write side.
func (p *Provider) RWMutexKey(k Key) core.RWLocker {
	return p.inspectableRW(p.newRWLocker(k.String(), k))
}

// Semaphore returns the semaphore of name admitting max holders. Its slots
// are max advisory keys derived from KeyOf(name) by hashing; a holder holds
// one slot. max < 1 is reported by the acquire calls.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	k, err := KeyOf(name)
	if err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 || max > maxSlots {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, kit.Invalid("semaphore max %d not in [1, %d]", max, maxSlots)))
	}
	return p.probe.Semaphore(p.newSemaphore(name, k, max))
}

// ensureFence creates the fence sequence or table, where it is missing, once
// per Provider, and adds the holder column to a fence table made by an
// earlier version.
func (p *Provider) ensureFence(ctx context.Context) error {
	return p.fenceSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		what := "fence table " + p.opts.FenceTable
		if p.sql.seq {
			what = "fence sequence " + p.opts.FenceTable
		}
		hasHolder, err := p.createMissing(ctx, what, p.sql.fence, "holder", p.sql.createFence())
		if err != nil || p.sql.seq || hasHolder {
			return err
		}
		// A table made by an earlier version lacks the holder column. Only
		// then take the ALTER's exclusive lock, which would stall grants.
		if _, err := p.pool.Exec(ctx, p.sql.addHolder()); err != nil {
			return fmt.Errorf("add holder to %s: %w", what, err)
		}
		return nil
	})
}

// createMissing creates the relation t (quoted), described by what in
// errors, with create, a CREATE ... IF NOT EXISTS statement, unless it
// exists, and reports whether it has column. CREATE ... IF NOT EXISTS needs
// CREATE on the schema even when the relation exists (PostgreSQL 15 revoked
// it from PUBLIC on schema public), which a user that only uses the
// relation may lack: create runs only when to_regclass finds no relation.
// A Provider creating it meanwhile makes create succeed or fail (execCreate
// absorbs a duplicate; a user without CREATE gets permission denied); the
// check after it decides, so either way the relation is used once it exists.
func (p *Provider) createMissing(ctx context.Context, what, t, column, create string) (hasColumn bool, err error) {
	exists, hasColumn, err := p.layout(ctx, what, t, column)
	if err != nil || exists {
		return hasColumn, err
	}
	cerr := execCreate(ctx, p.pool, create)
	exists, hasColumn, err = p.layout(ctx, what, t, column)
	if cerr != nil && (err != nil || !exists) {
		return false, fmt.Errorf("create %s: %w", what, cerr)
	}
	return hasColumn, err
}

// layout reports whether the relation t (quoted) exists and whether it has
// column.
func (p *Provider) layout(ctx context.Context, what, t, column string) (exists, hasColumn bool, err error) {
	err = p.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, EXISTS (SELECT FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, t, column).Scan(&exists, &hasColumn)
	if err != nil {
		return false, false, fmt.Errorf("check %s: %w", what, err)
	}
	return exists, hasColumn, nil
}

// execCreate runs q, a CREATE ... IF NOT EXISTS statement. Concurrent
// creators may race: a duplicate error means the winner made it.
func execCreate(ctx context.Context, pool *pgxpool.Pool, q string) error {
	for attempt := 0; ; attempt++ {
		_, err := pool.Exec(ctx, q)
		var pgErr *pgconn.PgError
		// 23505 (pg_type unique) or 42P07 (duplicate table): a concurrent
		// CREATE TABLE IF NOT EXISTS won; the table is there.
		if err == nil || errors.As(err, &pgErr) && (pgErr.Code == "42P07" || pgErr.Code == "23505") && attempt > 0 {
			return nil
		}
		if !errors.As(err, &pgErr) || (pgErr.Code != "42P07" && pgErr.Code != "23505") || attempt > 0 {
			return err
		}
		time.Sleep(10 * time.Millisecond) // let the winner commit, then check again
	}
}

// opCtx bounds a statement on a shared connection: the caller's ctx bounds
// only waiting, never a statement whose cancellation would break a
// connection other locks live on.
func (p *Provider) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.opts.Timeout)
}
