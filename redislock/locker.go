package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
)

// locker is every primitive: the Lock says which.
type locker struct {
	p    *Provider
	lock Lock
}

type rwLocker struct {
	*locker             // the write side, a core.Inspector
	read    core.Locker // the read side: many holders, no Inspector
}

func (l *rwLocker) RLocker() core.Locker { return l.read }

func (p *Provider) locker(lock Lock) core.Locker {
	if err := lock.validate(); err != nil {
		return core.FailedLocker(lock.Name, p.wrap("acquire", lock.Name, err))
	}
	l := &locker{p: p, lock: p.client.Prepare(lock)}
	if lock.Kind == KindMutex {
		return l
	}
	// A semaphore has many holders: hide Holder, which only a mutex or a
	// writer can answer.
	return struct{ core.Locker }{l}
}

func (l *locker) Name() string { return l.lock.Name }

// TryAcquire makes one attempt, one round trip. A held lock fails with an
// error matching core.ErrNotAcquired that says how long the holder's grant
// has left; an unreachable server fails with the driver's error.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	h, _, err := l.try(ctx, l.p.newOwner(), 0)
	return h, err
}

// Acquire waits until the lock is granted or ctx is done. A free lock costs
// one round trip. A held mutex queues the caller in Redis, and the release
// that frees it hands it over and announces the grant to this Provider, at
// no further round trip; the other primitives try again as soon as a
// release is announced. Without a signal the caller retries with jittered
// backoff, never later than the holder's grant expires. An unreachable
// server ends the wait at once with the driver's error. When ctx ends first
// the error matches core.ErrNotAcquired and ctx.Err(), and nothing is held:
// a grant made meanwhile is released (handed on) before Acquire returns.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	owner := l.p.newOwner()
	wait := l.p.cfg.markerTTL()
	key := l.p.client.WakeKey(l.lock)
	var take func() uint64
	if l.lock.Kind == KindMutex {
		// Mutex waiters queue, and a release hands the lock to the first
		// one and announces the grant to it alone. Expect that before the
		// first try, so an announcement that comes before we listen is kept.
		key = l.p.client.HandoffKey(l.lock, owner)
		var forget func()
		take, forget = l.p.waker.expectHandoff(key)
		defer forget()
	}
	lastStart := time.Now()
	h, _, err := l.try(ctx, owner, wait)
	if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
		l.gaveUp(ctx, owner, err)
		return h, err
	}
	// From here on we listen (subscribed below, before the next try), so
	// no release is missed.
	try := func(ctx context.Context) (core.Handle, time.Duration, error) {
		return l.try(ctx, owner, wait)
	}
	if take != nil {
		busy := err
		queued := true
		try = func(ctx context.Context) (core.Handle, time.Duration, error) {
			if tok := take(); tok != 0 {
				// Granted by the release that announced it, after our
				// last try had left: the lease started after lastStart.
				return l.p.newHandle(Grant{Lock: l.lock, Owner: owner}, tok, lastStart), 0, nil
			}
			if queued {
				// We just joined the queue: wait for the handoff instead
				// of asking again. Were the announcement lost, the
				// backoff's next try claims the lock all the same.
				queued = false
				return nil, 0, busy
			}
			lastStart = time.Now()
			return l.try(ctx, owner, wait)
		}
	}
	backoff := l.p.cfg.backoff
	if take != nil {
		// Queued: the handoff is pushed to us, and polls only refresh our
		// queue entry and recover a lost announcement. Keep them sparse
		// so that waiters do not load the server.
		backoff.Min = max(backoff.Min, queuedPollMin)
		backoff.Max = max(backoff.Max, backoff.Min)
	}
	wake, unsubscribe := l.p.waker.subscribe(key)
	defer unsubscribe()
	h, err = core.Wait(ctx, backoff, wake, try)
	if err != nil {
		l.gaveUp(ctx, owner, err)
		return nil, l.p.wrap("acquire", l.lock.Name, err)
	}
	return h, nil
}

// check fails an acquire that must not start: ctx is done, or the
// Provider is closed.
func (l *locker) check(ctx context.Context) error {
	switch {
	case ctx.Err() != nil:
		return l.p.wrap("acquire", l.lock.Name, core.NotAcquired(ctx))
	case l.p.closed.Load():
		return l.p.wrap("acquire", l.lock.Name, errClosed)
	}
	return nil
}

// gaveUp withdraws a waiter that ended busy or cut short by its context: a
// mutex waiter leaves the queue (releasing a grant handed to it meanwhile),
// a writer drops its marker so the readers it held back may go on. After a
// driver error it does nothing: the server is unreachable, and an entry or
// marker left behind expires within a second.
func (l *locker) gaveUp(ctx context.Context, owner string, err error) {
	if !errors.Is(err, core.ErrNotAcquired) || (l.lock.Kind != KindWrite && l.lock.Kind != KindMutex) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = l.p.client.Withdraw(ctx, Grant{Lock: l.lock, Owner: owner})
}

// queuedPollMin is the shortest pause between two polls of a queued mutex
// waiter.
const queuedPollMin = 20 * time.Millisecond

// cleanupTimeout bounds the best-effort calls made after an acquire failed.
const cleanupTimeout = time.Second

// try is one attempt. wait > 0 marks the caller as waiting (see
// Client.Acquire).
func (l *locker) try(ctx context.Context, owner string, wait time.Duration) (core.Handle, time.Duration, error) {
	start := time.Now()
	g := Grant{Lock: l.lock, Owner: owner}
	res, err := l.p.client.Acquire(ctx, l.lock, owner, l.p.cfg.ttl, wait)
	if err != nil {
		if ctx.Err() != nil {
			// The call was cut short by ctx: the script may have run. Give
			// back whatever it may have granted before reporting.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_, _ = l.p.client.Release(cctx, g)
			cancel()
			return nil, 0, l.p.wrap("acquire", l.lock.Name, core.NotAcquired(ctx))
		}
		return nil, 0, l.p.wrap("acquire", l.lock.Name, err)
	}
	if !res.Acquired {
		return nil, res.RetryIn, l.p.wrap("acquire", l.lock.Name,
			core.Busy("held by another owner (%s free within %v)", l.lock.Kind, res.RetryIn))
	}
	return l.p.newHandle(g, res.Token, start), 0, nil
}
