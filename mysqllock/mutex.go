package mysqllock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// locker is a Mutex: one user-level lock, whose counter row has the same
// name.
type locker struct {
	p    *Provider
	name string
	lock string // the server's lock name, also the counter row's
	// locks and args are the claim's, built once: read only.
	locks []string
	args  []any
}

func (p *Provider) newLocker(name string) *locker {
	l := &locker{p: p, name: name, lock: lockName(kindMutex, name)}
	l.locks = []string{l.lock}
	l.args = p.sql.grantArgs(claim{row: l.lock, locks: l.locks}, p.opts.Identity, 0)
	return l
}

// Name returns the name the lock was made with.
func (l *locker) Name() string { return l.name }

// TryAcquire makes one attempt: one round trip that tries the lock and, when
// granted, bumps its fence counter. It runs on a connection shared with
// other held locks. A lock held elsewhere (or by another handle of this
// process) gives an error matching core.ErrNotAcquired; a dead server gives
// the driver's error. ctx only bounds waiting for a connection: the
// statement itself runs to completion (bounded by WithTimeout), and a grant
// that races the end of ctx is released before the error returns.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	return l.p.sess.TryAcquire(ctx, l.name, l.try)
}

// Acquire waits until the lock is granted or ctx is done. It first tries
// on a shared connection (one round trip when the lock is free); when the
// lock is busy it waits in the server's own queue (GET_LOCK with a timeout
// up to ctx's deadline) on a connection of its own; when ctx ends first, a
// KILL QUERY on another connection ends the wait at once. The server hands
// the lock to the next waiter as soon as it is released, in about one
// round trip. If every connection is busy (WithMaxConns) it retries with
// backoff instead. With local handoffs on (WithLocalHandoff) it lines up
// behind the Provider's earlier waiters for the lock, and while a handle of
// this Provider holds the lock it waits locally for the release to hand
// the lock over (see "Local handoff" in the package documentation).
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	return l.p.sess.Acquire(ctx, kit.SessionAcquire[string, *session, struct{}]{
		Name: l.name, Wake: l.lock, HandsOff: l.p.sess.Hand.On(), Try: l.try,
		Block: func(ctx context.Context, c *conn) (core.Handle, time.Duration, error) {
			return l.p.block(ctx, c, l.claim(), maxWait)
		},
	})
}

// claim is what a grant statement of the mutex asks for.
func (l *locker) claim() claim {
	return claim{name: l.name, row: l.lock, locks: l.locks, handoff: l.p.sess.Hand.On(), args: l.args}
}

func (l *locker) try(ctx context.Context) (core.Handle, error) {
	if err := l.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	return l.p.sess.Try(ctx, func(ctx context.Context) (*conn, error) {
		return l.p.sess.Shared(ctx, l.lock, exclusive)
	}, func(c *conn) (core.Handle, error) {
		return l.p.tryOn(ctx, c, l.claim())
	})
}

// exclusive: a lock held by a grant of this Provider excludes every other
// request for it.
func exclusive(*grant) bool { return true }
