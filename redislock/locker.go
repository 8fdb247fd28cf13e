package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// locker is every primitive: its Lock says which.
type locker struct {
	p    *Provider
	lock redisop.Lock
}

type rwLocker struct {
	*locker             // the write side, a core.Inspector
	read    core.Locker // the read side: many holders, no Inspector
}

func (l *rwLocker) RLocker() core.Locker { return l.read }

func (p *Provider) locker(lock redisop.Lock) core.Locker {
	if err := lock.Validate(); err != nil {
		return kit.FailedLocker(lock.Name, kit.Wrap(backend, "acquire", lock.Name, err))
	}
	l := &locker{p: p, lock: p.client.Prepare(lock)}
	if lock.Kind == redisop.KindMutex {
		return p.probe.Mutex(l)
	}
	// A semaphore has many holders: hide Holder, which only a mutex or a
	// writer can answer.
	return p.probe.Semaphore(struct{ core.Locker }{l})
}

func (l *locker) Name() string { return l.lock.Name }

// TryAcquire makes one attempt, one round trip. A held lock fails with an
// error matching core.ErrNotAcquired that says how long the holder's grant
// has left; an unreachable server fails with the driver's error.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	h, _, err := l.try(ctx, redisop.NewTaggedOwner(l.p.idTag), 0)
	return h, err
}

// Acquire waits until the lock is granted or ctx is done. A free lock costs
// one round trip. The other primitives try again as soon as a release is
// announced on the shared channel; a mutex waiter gets the lock handed to
// it (see acquireMutex). Without a signal the caller retries with jittered
// backoff, never later than the holder's grant expires. An unreachable
// server fails the first try at once with the driver's error; a waiter
// rides through a server that cannot be reached or take writes for now (a
// failover, a restart), trying again on the same backoff. When ctx ends
// first the error matches core.ErrNotAcquired and ctx.Err(), and nothing is
// held: a grant made meanwhile is released (handed on) before Acquire
// returns.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	if l.lock.Kind == redisop.KindMutex {
		return l.acquireMutex(ctx)
	}
	owner := redisop.NewTaggedOwner(l.p.idTag)
	wait := l.p.cfg.markerTTL()
	h, _, err := l.try(ctx, owner, wait)
	if settled(ctx, err) {
		l.gaveUp(ctx, owner, err)
		return h, l.outOfTime(ctx, err)
	}
	// From here on we listen (subscribed before the next try), so no
	// release is missed.
	wake, unsubscribe := l.p.waker.Subscribe(l.p.client.WakeKey(l.lock))
	defer unsubscribe()
	h, err = kit.Wait(ctx, l.p.cfg.backoff, wake, rideThrough(func(ctx context.Context) (core.Handle, time.Duration, error) {
		return l.try(ctx, owner, wait)
	}))
	if err != nil {
		l.gaveUp(ctx, owner, err)
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, err)
	}
	return h, nil
}

// settled reports whether an attempt that ended with err ends its Acquire:
// granted, failed other than busy, or out of time.
func settled(ctx context.Context, err error) bool {
	return err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil
}

// outOfTime is err, except that a busy lock found by a try that ctx's end
// cut short is reported as the wait running out: an error matching
// core.ErrNotAcquired and ctx.Err(), as every Acquire that gave up returns.
func (l *locker) outOfTime(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, core.ErrNotAcquired) && !errors.Is(err, ctx.Err()) {
		return kit.Wrap(backend, "acquire", l.lock.Name, kit.NotAcquired(ctx))
	}
	return err
}

// check fails an acquire that must not start: ctx is done, or the
// Provider is closed.
func (l *locker) check(ctx context.Context) error {
	switch {
	case ctx.Err() != nil:
		return kit.Wrap(backend, "acquire", l.lock.Name, kit.NotAcquired(ctx))
	case l.p.closed.Load():
		return kit.Wrap(backend, "acquire", l.lock.Name, errClosed)
	}
	return nil
}

// gaveUp withdraws a waiter that ended busy or cut short by its context: a
// mutex waiter leaves the queue (releasing a grant handed to it meanwhile),
// a writer drops its marker so the readers it held back may go on. After a
// driver error it does nothing: the server is unreachable, and an entry or
// marker left behind expires within a second.
func (l *locker) gaveUp(ctx context.Context, owner string, err error) {
	if !errors.Is(err, core.ErrNotAcquired) || (l.lock.Kind != redisop.KindWrite && l.lock.Kind != redisop.KindMutex) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	_ = l.p.client.Withdraw(ctx, redisop.Grant{Lock: l.lock, Owner: owner})
}

// try is one attempt. wait > 0 marks the caller as waiting (see
// redisop.Client.Acquire).
func (l *locker) try(ctx context.Context, owner string, wait time.Duration) (core.Handle, time.Duration, error) {
	start := time.Now()
	g := redisop.Grant{Lock: l.lock, Owner: owner}
	res, err := l.p.client.Acquire(ctx, l.lock, owner, l.p.cfg.ttl, wait)
	if err != nil {
		if ctx.Err() != nil {
			// The call was cut short by ctx: the script may have run. Give
			// back whatever it may have granted before reporting.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
			_, _ = l.p.client.Release(cctx, g)
			cancel()
			return nil, 0, kit.Wrap(backend, "acquire", l.lock.Name, kit.NotAcquired(ctx))
		}
		return nil, 0, kit.Wrap(backend, "acquire", l.lock.Name, err)
	}
	if !res.Acquired {
		return nil, res.RetryIn, kit.Wrap(backend, "acquire", l.lock.Name,
			kit.Busy("held by another owner (%s free within %v)", l.lock.Kind, res.RetryIn))
	}
	return l.p.newHandle(g, res.Token, start), 0, nil
}
