package pglock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5/pgconn"
)

// locker is one side of an advisory lock on one key: a Mutex, or the write
// or read side of an RWMutex.
type locker struct {
	p    *Provider
	name string
	key  Key
	mode lockMode
	// fence names the lock's counter row: the key itself, so every
	// primitive that takes this advisory lock shares one counter.
	fence  string
	notify bool // a semaphore slot: releases notify (see grant.notify)
}

type rwLocker struct {
	*locker
	r *locker
}

// RLocker returns the read side. It has many holders, so it does not
// implement core.Inspector.
func (l *rwLocker) RLocker() core.Locker { return struct{ core.Locker }{l.r} }

func (p *Provider) newLocker(name string, k Key, m lockMode) *locker {
	return &locker{p: p, name: name, key: k, mode: m, fence: "k:" + k.String()}
}

func (p *Provider) newRWLocker(name string, k Key) *rwLocker {
	return &rwLocker{locker: p.newLocker(name, k, exclusive), r: p.newLocker(name, k, shared)}
}

// Name returns the name the lock was made with (the key's canonical form
// for locks made from a Key).
func (l *locker) Name() string { return l.name }

// TryAcquire makes one attempt: one round trip that tries the lock and, when
// granted, bumps its fence counter. It runs on a connection shared with
// other held locks. A lock held elsewhere (or by another handle of this
// process) gives an error matching core.ErrNotAcquired; a dead server gives
// the driver's error. ctx only bounds waiting for a connection: the
// statement itself runs to completion (bounded by WithTimeout), and a grant
// that races the cancellation of ctx is released before the error returns.
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
// lock is busy it waits in PostgreSQL's own queue (pg_advisory_lock, which
// gives waiting writers precedence over new readers) on a connection of its
// own, with lock_timeout set from ctx's deadline and a cancel request sent
// when ctx is cancelled. The server hands the lock over to the next waiter
// as soon as it is released, in about one round trip. If every connection
// is busy (WithMaxConns) it retries with backoff instead. An exclusive
// Acquire with local handoffs on (WithLocalHandoff) lines up behind the
// Provider's earlier waiters for the key, and while the key is held by an
// exclusive grant of this Provider it waits locally for the release to hand
// the lock over (see "Local handoff" in the package documentation).
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", l.name, kit.NotAcquired(ctx))
	}
	wake, unsubscribe := l.p.notify.Subscribe(l.fence)
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
		h, err = l.block(ctx, c)
		return h, 0, err
	}
	var h core.Handle
	var err error
	if l.handsOff() {
		h, err = l.acquireLocal(ctx, wake, attempt)
	} else {
		h, err = kit.Wait(ctx, kit.DefaultBackoff, wake, attempt)
	}
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", l.name, err)
	}
	return h, nil
}

// handsOff reports whether grants of l may be handed on locally: the
// exclusive side of a Mutex or RWMutex (not a semaphore slot) of a
// Provider with handoffs on.
func (l *locker) handsOff() bool {
	return l.mode == exclusive && !l.notify && l.p.handoffOn()
}

func (l *locker) try(ctx context.Context) (core.Handle, error) {
	if err := l.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := l.p.sharedConn(ctx, l.key, l.mode, false)
		if errors.Is(err, errLocalBusy) || errors.Is(err, errNoConn) {
			return nil, kit.Busy("%v", err)
		}
		if err != nil {
			return nil, err
		}
		q, args := l.p.sql.try(l.key, l.mode)
		var ok bool
		var token *int64
		octx, unbound := c.bound(ctx)
		err = c.pc.QueryRow(octx, q, append(args, l.fence, l.p.opts.identity)...).Scan(&ok, &token)
		unbound()
		if err != nil {
			if c.connFailed(err) {
				// The session is gone and any grant with it: a connection
				// that broke while idle must not fail this acquire.
				c.fail(err)
				c.mu.Unlock()
				if attempt == 0 {
					continue
				}
				return nil, err
			}
			c.unlockIfHeld(ctx, l.key, l.mode)
			c.mu.Unlock()
			return nil, err
		}
		if !ok {
			c.mu.Unlock()
			return nil, kit.Busy("held by another session")
		}
		return l.granted(ctx, c, *token)
	}
}

// granted registers a grant on c (locked), unlocks c, and returns the
// handle, or releases the grant when ctx ended meanwhile.
func (l *locker) granted(ctx context.Context, c *conn, token int64) (core.Handle, error) {
	g := &grant{c: c, key: l.key, mode: l.mode, wake: l.fence, notify: l.notify, name: l.name,
		handoff: l.handsOff(), run: kit.StartRun(time.Now())}
	g.h = kit.NewHandle(uint64(token), func(rctx context.Context) error {
		return l.p.release(rctx, g)
	})
	c.addGrant(g)
	c.mu.Unlock()
	if ctx.Err() != nil {
		_ = g.h.Release(ctx)
		return nil, kit.NotAcquired(ctx)
	}
	return g.h, nil
}

// timedWaitMax is the longest wait given a server-side lock_timeout.
// Longer waits (and waits without a deadline) end by a cancel request when
// ctx ends, which saves two set_config calls on every handover.
const timedWaitMax = 10 * time.Second

// block waits for the lock on c, a connection reserved by emptyConn.
func (l *locker) block(ctx context.Context, c *conn) (core.Handle, error) {
	q, args := l.p.sql.block(l.key, l.mode)
	args = append(args, l.fence, l.p.opts.identity)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timedWaitMax {
		ms := math.Ceil(float64(time.Until(dl)) / float64(time.Millisecond))
		if ms < 1 {
			c.doneWaiting()
			return nil, kit.NotAcquired(ctx)
		}
		q, args = l.p.sql.blockTimed(l.key, l.mode)
		args = append(args, l.fence, l.p.opts.identity, strconv.FormatFloat(ms, 'f', 0, 64)+"ms")
	}
	if ctx.Err() != nil {
		c.doneWaiting()
		return nil, kit.NotAcquired(ctx)
	}
	var token int64
	err := c.pc.QueryRow(ctx, q, args...).Scan(&token)
	if err == nil {
		l.p.mu.Lock()
		c.waiting = false
		l.p.mu.Unlock()
		// granted unlocks c, and releases the grant if ctx ended.
		return l.granted(ctx, c, token)
	}
	if c.connFailed(err) {
		// Closing the session frees a grant that may have raced the error.
		c.fail(err)
		c.mu.Unlock()
		if ctx.Err() != nil {
			return nil, kit.NotAcquired(ctx)
		}
		return nil, err
	}
	// The server may have granted the lock at the moment the wait was
	// cancelled or timed out: look in pg_locks and unlock if so.
	if c.unlockIfHeld(ctx, l.key, l.mode) {
		c.doneWaiting()
	} else {
		c.mu.Unlock()
	}
	var pgErr *pgconn.PgError
	switch {
	case ctx.Err() != nil:
		return nil, kit.NotAcquired(ctx)
	case errors.As(err, &pgErr) && pgErr.Code == "55P03":
		// lock_timeout fired a moment before ctx's deadline: try again.
		return nil, kit.Busy("lock_timeout")
	}
	return nil, err
}

// release unlocks g on its connection: one round trip. When the connection
// has failed, the server has already freed the lock and release returns nil.
// When the unlock fails, the connection is failed (closing the session is
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
	q, args := p.sql.unlock(g.key, g.mode)
	if g.notify {
		q, args = p.sql.unlockNotify(g.key, g.wake)
	}
	octx, unbound := c.bound(ctx)
	var ok bool
	err := c.pc.QueryRow(octx, q, args...).Scan(&ok)
	unbound()
	if err != nil {
		c.fail(fmt.Errorf("release: %w", err))
		return kit.Wrap(backend, "release", g.name, err)
	}
	c.dropGrant(g)
	return nil
}
