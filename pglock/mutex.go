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
	return l.p.sess.TryAcquire(ctx, l.name, l.try)
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
	return l.p.sess.Acquire(ctx, kit.SessionAcquire[Key, *session, lockInfo]{
		Name: l.name, Wake: l.fence, HandsOff: l.handsOff(), Try: l.try,
		Block: func(ctx context.Context, c *conn) (core.Handle, time.Duration, error) {
			h, err := l.block(ctx, c)
			return h, 0, err
		},
	})
}

// handsOff reports whether grants of l may be handed on locally: the
// exclusive side of a Mutex or RWMutex (not a semaphore slot) of a
// Provider with handoffs on.
func (l *locker) handsOff() bool {
	return l.mode == exclusive && !l.notify && l.p.handoffOn()
}

// excludes reports whether a grant of this Provider excludes l's request:
// either of them is exclusive.
func (l *locker) excludes(g *grant) bool {
	return l.mode == exclusive || g.Info.mode == exclusive
}

func (l *locker) try(ctx context.Context) (core.Handle, error) {
	if err := l.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	return l.p.sess.Try(ctx, func(ctx context.Context) (*conn, error) {
		return l.p.sess.Shared(ctx, l.key, l.excludes)
	}, func(c *conn) (core.Handle, error) {
		q, args := l.p.sql.try(l.key, l.mode)
		var ok bool
		var token *int64
		octx, unbound := c.Conn.bound(ctx)
		err := c.Conn.pc.QueryRow(octx, q, append(args, l.fence, l.p.opts.Identity)...).Scan(&ok, &token)
		unbound()
		if err != nil {
			if c.Conn.connFailed(err) {
				c.Fail(err)
				c.Unlock()
				return nil, fmt.Errorf("%w: %w", kit.ErrSessionFailed, err)
			}
			unlockIfHeld(ctx, c, l.key, l.mode)
			c.Unlock()
			return nil, err
		}
		if !ok {
			c.Unlock()
			return nil, kit.Busy("held by another session")
		}
		return l.granted(ctx, c, *token)
	})
}

// granted registers a grant on c (locked), unlocks c, and returns the
// handle, or releases the grant when ctx ended meanwhile.
func (l *locker) granted(ctx context.Context, c *conn, token int64) (core.Handle, error) {
	return c.Grant(ctx, &grant{Key: l.key, Wake: l.fence, Name: l.name, Info: lockInfo{mode: l.mode, notify: l.notify},
		Handoff: l.handsOff()}, uint64(token))
}

// timedWaitMax is the longest wait given a server-side lock_timeout.
// Longer waits (and waits without a deadline) end by a cancel request when
// ctx ends, which saves two set_config calls on every handover.
const timedWaitMax = 10 * time.Second

// block waits for the lock on c, a connection reserved by Sessions.Empty.
func (l *locker) block(ctx context.Context, c *conn) (core.Handle, error) {
	q, args := l.p.sql.block(l.key, l.mode)
	args = append(args, l.fence, l.p.opts.Identity)
	timed := false
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timedWaitMax {
		ms := math.Ceil(float64(time.Until(dl)) / float64(time.Millisecond))
		if ms < 1 {
			c.DoneWaiting()
			return nil, kit.NotAcquired(ctx)
		}
		q, args = l.p.sql.blockTimed(l.key, l.mode)
		timed = true
		args = append(args, l.fence, l.p.opts.Identity, strconv.FormatFloat(ms, 'f', 0, 64)+"ms")
	}
	if ctx.Err() != nil {
		c.DoneWaiting()
		return nil, kit.NotAcquired(ctx)
	}
	var token int64
	qctx, qcancel := serverTimed(ctx, timed)
	err := c.Conn.pc.QueryRow(qctx, q, args...).Scan(&token)
	qcancel()
	if err == nil {
		// granted unlocks c, and releases the grant if ctx ended.
		return l.granted(ctx, c, token)
	}
	if c.Conn.connFailed(err) {
		// Closing the session frees a grant that may have raced the error.
		c.Fail(err)
		c.Unlock()
		if ctx.Err() != nil {
			return nil, kit.NotAcquired(ctx)
		}
		return nil, err
	}
	// The server may have granted the lock at the moment the wait was
	// cancelled or timed out: look in pg_locks and unlock if so.
	if unlockIfHeld(ctx, c, l.key, l.mode) {
		c.DoneWaiting()
	} else {
		c.Unlock()
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

// serverGrace is how long after ctx's deadline a wait bounded by the
// server's lock_timeout may still run before the client cancels it.
const serverGrace = time.Second

// serverTimed returns the context of a wait the server times out itself
// (timed): ctx's deadline moved on by serverGrace, so that the server's
// lock_timeout error ends the wait rather than a cancel request racing it
// (pgx returns about 100 ms late when its cancel request and the server's
// error cross), while a cancel of ctx still ends the wait at once.
func serverTimed(ctx context.Context, timed bool) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !timed || !ok {
		return ctx, func() {}
	}
	qctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl.Add(serverGrace))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return qctx, func() { stop(); cancel() }
}
