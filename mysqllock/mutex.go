package mysqllock

import (
	"context"
	"errors"
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
}

func (p *Provider) newLocker(name string) *locker {
	return &locker{p: p, name: name, lock: lockName(kindMutex, name)}
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
	return l.p.tryAcquire(ctx, l.name, l.try)
}

// tryAcquire is TryAcquire for every primitive: try, unless ctx is done
// already, with its error wrapped.
func (p *Provider) tryAcquire(ctx context.Context, name string, try func(context.Context) (core.Handle, error)) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	h, err := try(ctx)
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", name, err)
	}
	return h, nil
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
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", l.name, kit.NotAcquired(ctx))
	}
	wake, unsubscribe := l.p.notify.Subscribe(l.lock)
	defer unsubscribe()
	attempt := func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := l.try(ctx)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) {
			return h, 0, err
		}
		c, cerr := l.p.emptyConn(ctx)
		if cerr != nil {
			return nil, 0, cerr
		}
		if c == nil {
			return nil, 0, err // no connection to wait on: back off
		}
		return l.p.block(ctx, c, l.claim(), maxWait)
	}
	var h core.Handle
	var err error
	if l.p.hand.On() {
		h, err = l.acquireLocal(ctx, wake, attempt)
	} else {
		h, err = kit.Wait(ctx, kit.DefaultBackoff, wake, attempt)
	}
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", l.name, err)
	}
	return h, nil
}

// claim is what a grant statement of the mutex asks for.
func (l *locker) claim() claim {
	return claim{name: l.name, row: l.lock, locks: []string{l.lock}, handoff: l.p.hand.On()}
}

func (l *locker) try(ctx context.Context) (core.Handle, error) {
	if err := l.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := l.p.sharedConn(ctx, l.lock, false)
		if errors.Is(err, errLocalBusy) || errors.Is(err, errNoConn) {
			return nil, kit.Busy("%v", err)
		}
		if err != nil {
			return nil, err
		}
		h, err := l.p.tryOn(ctx, c, l.claim())
		if err != nil && attempt == 0 && errors.Is(err, errConnFailed) {
			// The session is gone and any grant with it: a connection
			// that broke while idle must not fail this acquire.
			continue
		}
		return h, err
	}
}

// release unlocks g on its connection: one round trip. When the connection
// has failed, the server has already freed the lock and release returns nil.
// When the unlock fails, the connection is failed (ending the session is
// the sure way to free the lock), which loses the other handles on it. When
// a waiter of this Provider can take the lock over, release hands it on
// instead, keeping the lock on the connection (see handoff.go).
func (p *Provider) release(ctx context.Context, g *grant) error {
	if p.handOff(ctx, g) {
		return nil
	}
	c := g.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isBroken() {
		return nil
	}
	if _, err := c.exec(ctx, unlockSQL, g.lock); err != nil {
		c.fail(errors.Join(errors.New("release"), err))
		return kit.Wrap(backend, "release", g.name, err)
	}
	c.dropGrant(g)
	return nil
}
