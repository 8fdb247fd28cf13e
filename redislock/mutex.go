package redislock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// errHeldHere is why a mutex waiter waits without asking the server.
var errHeldHere = kit.Busy("held by this process")

// errHeldElsewhere is why a mutex waiter queued on the server waits.
var errHeldElsewhere = kit.Busy("held by another process")

// mutexWait is one Acquire of a mutex: its place in this Provider's line
// for the lock and, once it asked the server, in the server's queue.
type mutexWait struct {
	l     *locker
	owner string
	wait  time.Duration // how long the server keeps our queue entry between tries
	line  string        // the lock's line in Provider.hand: its lock key
	hkey  string        // our HandoffKey: a handoff by the server is announced on it
	w     *kit.Waiter[*handle]
	take  func() uint64 // the token of a handoff by the server announced since (0: none)

	// away: we asked the server, which may queue us there; from then on
	// no release of ours hands us the lock (a grant must never reach us
	// both ways), and giving up withdraws us from the server's queue.
	away bool
	// fresh: we just queued on the server; wait before asking again.
	fresh     bool
	lastStart time.Time // when our last try on the server started
}

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
	m := &mutexWait{l: l, owner: redisop.NewTaggedOwner(p.idTag), wait: p.cfg.markerTTL(), line: p.client.Key(l.lock)}
	// Expect a handoff by the server before we may queue there, so that
	// an announcement that comes before we listen is kept.
	m.hkey = p.client.HandoffKey(l.lock, m.owner)
	take, forget := p.waker.ExpectHandoff(m.hkey)
	defer forget()
	m.take = take
	w, first := p.hand.Enqueue(m.line, m.hkey)
	m.w, m.lastStart = w, time.Now()
	if first {
		if h, done, err := m.tryFirst(ctx); done {
			return h, err
		}
	}
	// Listen for a handoff by the server, a local handoff, a local
	// wake-up; from here on none is missed.
	wake, unsubscribe := p.waker.Subscribe(m.hkey)
	defer unsubscribe()
	var h core.Handle
	var err error
	select {
	case <-w.Turn():
		h, err = kit.Wait(ctx, p.cfg.backoff.Queued(), wake, rideThrough(m.attempt))
	case <-ctx.Done():
		err = kit.NotAcquired(ctx)
	}
	return m.leave(ctx, h, err)
}

// tryFirst is the try of the first in line, at once: only a busy lock costs
// the subscription. It tries nothing while a live grant of this Provider
// holds the lock. It reports done when the try settled the Acquire, with
// its outcome; m has then left the line.
func (m *mutexWait) tryFirst(ctx context.Context) (core.Handle, bool, error) {
	p := m.l.p
	// Away first, so that no release claims us from the moment we look
	// for a local holder.
	if !p.hand.Away(m.w) {
		return nil, false, nil
	}
	if hl, ok := p.hand.Holder(m.line); ok && !hl.lost() {
		p.hand.Back(m.w) // held here: wait for its release
		return nil, false, nil
	}
	m.away, m.fresh = true, true
	h, _, err := m.l.try(ctx, m.owner, m.wait)
	if !settled(ctx, err) {
		return nil, false, nil
	}
	if g, handed := p.hand.Leave(m.line, m.w); handed {
		// Cannot happen (we were away), but a handle is never dropped
		// unreleased.
		releaseUnwanted(ctx, g)
	}
	if err != nil {
		m.l.gaveUp(ctx, m.owner, err)
	}
	return h, true, m.l.outOfTime(ctx, err)
}

// attempt is one try of the waiter whose turn it is: it takes a local
// handoff or one announced by the server, waits locally while a live grant
// of this Provider holds the lock, and otherwise keeps its place on the
// server, whoever holds the lock.
func (m *mutexWait) attempt(ctx context.Context) (core.Handle, time.Duration, error) {
	p := m.l.p
	if g, ok := p.hand.Take(m.line, m.w); ok {
		return g, 0, nil
	}
	if tok := m.take(); tok != 0 {
		// Granted by a release on the server after our last try had
		// left: the lease started after lastStart.
		return p.handedByServer(ctx, redisop.Grant{Lock: m.l.lock, Owner: m.owner}, tok, m.lastStart)
	}
	if !m.away {
		if hl, ok := p.hand.Holder(m.line); ok && !hl.lost() {
			// Held here: its release hands the lock to us or wakes us.
			return nil, 0, errHeldHere
		}
		if !p.hand.Away(m.w) {
			return nil, 0, errHeldHere // a handoff to us is under way
		}
		m.away = true
	}
	if m.fresh {
		// Queued by the try before we listened: wait for the handoff
		// instead of asking again. Were its announcement lost, the
		// backoff's next try claims the lock all the same.
		m.fresh = false
		return nil, 0, errHeldElsewhere
	}
	m.lastStart = time.Now()
	return m.l.try(ctx, m.owner, m.wait)
}

// leave takes m out of the line once its wait ended with h or err. A local
// handoff that landed meanwhile is the grant when the wait failed
// otherwise; when the wait ended with ctx it is given up, to the next in
// line if any, as a grant racing a cancellation must be.
func (m *mutexWait) leave(ctx context.Context, h core.Handle, err error) (core.Handle, error) {
	p := m.l.p
	g, handed := p.hand.Leave(m.line, m.w)
	if handed {
		if h == nil && ctx.Err() == nil {
			return g, nil
		}
		// Or with a grant of our own, which cannot happen (a waiter that
		// asks the server is never handed the lock), but a handle is
		// never dropped unreleased.
		releaseUnwanted(ctx, g)
	}
	if err != nil {
		if m.away {
			m.l.gaveUp(ctx, m.owner, err)
		}
		return nil, kit.Wrap(backend, "acquire", m.l.lock.Name, err)
	}
	return h, nil
}

// releaseUnwanted gives up a grant handed to a waiter that does not want
// it, within kit.CleanupTimeout: its release hands it to the next in line.
func releaseUnwanted(ctx context.Context, g core.Handle) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	_ = g.Release(rctx)
	cancel()
}
