package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
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
		return kit.FailedLocker(lock.Name, p.wrap("acquire", lock.Name, err))
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
// one round trip. The other primitives try again as soon as a release is
// announced on the shared channel; a mutex waiter gets the lock handed to
// it (see acquireMutex). Without a signal the caller retries with jittered
// backoff, never later than the holder's grant expires. An unreachable
// server ends the wait at once with the driver's error. When ctx ends first
// the error matches core.ErrNotAcquired and ctx.Err(), and nothing is held:
// a grant made meanwhile is released (handed on) before Acquire returns.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	if l.lock.Kind == KindMutex {
		return l.acquireMutex(ctx)
	}
	owner := l.p.newOwner()
	wait := l.p.cfg.markerTTL()
	h, _, err := l.try(ctx, owner, wait)
	if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
		l.gaveUp(ctx, owner, err)
		return h, err
	}
	// From here on we listen (subscribed before the next try), so no
	// release is missed.
	wake, unsubscribe := l.p.waker.subscribe(l.p.client.WakeKey(l.lock))
	defer unsubscribe()
	h, err = kit.Wait(ctx, l.p.cfg.backoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		return l.try(ctx, owner, wait)
	})
	if err != nil {
		l.gaveUp(ctx, owner, err)
		return nil, l.p.wrap("acquire", l.lock.Name, err)
	}
	return h, nil
}

// errHeldHere is why a mutex waiter waits without asking the server.
var errHeldHere = kit.Busy("held by this process")

// errHeldElsewhere is why a mutex waiter queued on the server waits.
var errHeldElsewhere = kit.Busy("held by another process")

// acquireMutex is Acquire for a mutex. The caller lines up behind this
// Provider's earlier waiters for the lock; only the first in line
// contends. While a live grant of this Provider holds the lock, the first
// waiter waits locally: the release hands it the lock (handoff.go) or wakes
// it once released. Otherwise it tries the server, where a busy lock
// queues it: a release there hands the lock to the first waiter queued and
// announces the grant to that waiter's Provider alone, at no further round
// trip; were the announcement lost, the next try claims the lock all the
// same.
func (l *locker) acquireMutex(ctx context.Context) (core.Handle, error) {
	p := l.p
	owner := p.newOwner()
	wait := p.cfg.markerTTL()
	line := p.client.Key(l.lock)
	// Expect a handoff by the server before we may queue there, so that
	// an announcement that comes before we listen is kept.
	hkey := p.client.HandoffKey(l.lock, owner)
	take, forget := p.waker.expectHandoff(hkey)
	defer forget()
	w, first := p.hand.Enqueue(line, hkey)
	// away: we asked the server, which may queue us there; from then on
	// no release of ours hands us the lock (a grant must never reach us
	// both ways), and giving up withdraws us from the server's queue.
	away := false
	lastStart := time.Now()
	fresh := false // we just queued on the server: wait before asking again
	var h core.Handle
	var err error
	// First in line and not held here: try at once (only a busy lock costs
	// the subscription below). Away first, so that no release claims us
	// from the moment we look for a local holder.
	if first && p.hand.Away(w) {
		if hl, ok := p.hand.Holder(line); ok && !hl.lost() {
			p.hand.Back(w) // held here: wait for its release below
		} else {
			away, fresh = true, true
			h, _, err = l.try(ctx, owner, wait)
			if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
				if g, handed := p.hand.Leave(line, w); handed {
					// Cannot happen (we were away), but a handle is never
					// dropped unreleased.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
					_ = g.Release(rctx)
					cancel()
				}
				if err != nil {
					l.gaveUp(ctx, owner, err)
				}
				return h, err
			}
		}
	}
	// Listen for a handoff by the server, a local handoff, a local
	// wake-up; from here on none is missed.
	wake, unsubscribe := p.waker.subscribe(hkey)
	defer unsubscribe()
	// Queued waiters have the handoff pushed to them, and polls only
	// refresh their entry and recover a lost announcement. Keep them sparse
	// so that waiters do not load the server.
	backoff := p.cfg.backoff
	backoff.Min = max(backoff.Min, queuedPollMin)
	backoff.Max = max(backoff.Max, backoff.Min)
	select {
	case <-w.Turn():
		h, err = kit.Wait(ctx, backoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok := p.hand.Take(line, w); ok {
				return g, 0, nil
			}
			if tok := take(); tok != 0 {
				// Granted by a release on the server after our last try
				// had left: the lease started after lastStart.
				return p.newHandle(Grant{Lock: l.lock, Owner: owner}, tok, lastStart), 0, nil
			}
			if !away {
				if hl, ok := p.hand.Holder(line); ok && !hl.lost() {
					// Held here: its release hands the lock to us or
					// wakes us.
					return nil, 0, errHeldHere
				}
				if !p.hand.Away(w) {
					return nil, 0, errHeldHere // a handoff to us is under way
				}
				away = true
			}
			// Away (queued, or about to be): keep our place on the server,
			// whoever holds the lock.
			if fresh {
				// Queued by the try before we listened: wait for the
				// handoff instead of asking again. Were its announcement
				// lost, the backoff's next try claims the lock all the
				// same.
				fresh = false
				return nil, 0, errHeldElsewhere
			}
			lastStart = time.Now()
			return l.try(ctx, owner, wait)
		})
	case <-ctx.Done():
		err = kit.NotAcquired(ctx)
	}
	g, handed := p.hand.Leave(line, w)
	if handed {
		if h == nil && ctx.Err() == nil {
			// Handed over as the wait failed otherwise: the grant is good.
			return g, nil
		}
		// A handoff landed as the wait ended with ctx (or with a grant of
		// our own, which cannot happen: a waiter that asks the server is
		// never handed the lock; but a handle is never dropped
		// unreleased). Give it up, to the next in line if any, as a grant
		// racing a cancellation must be.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = g.Release(rctx)
		cancel()
	}
	if err != nil {
		if away {
			l.gaveUp(ctx, owner, err)
		}
		return nil, p.wrap("acquire", l.lock.Name, err)
	}
	return h, nil
}

// check fails an acquire that must not start: ctx is done, or the
// Provider is closed.
func (l *locker) check(ctx context.Context) error {
	switch {
	case ctx.Err() != nil:
		return l.p.wrap("acquire", l.lock.Name, kit.NotAcquired(ctx))
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
			return nil, 0, l.p.wrap("acquire", l.lock.Name, kit.NotAcquired(ctx))
		}
		return nil, 0, l.p.wrap("acquire", l.lock.Name, err)
	}
	if !res.Acquired {
		return nil, res.RetryIn, l.p.wrap("acquire", l.lock.Name,
			kit.Busy("held by another owner (%s free within %v)", l.lock.Kind, res.RetryIn))
	}
	return l.p.newHandle(g, res.Token, start), 0, nil
}
