package natslock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Local handoff. When a holder releases a mutex (or a semaphore slot) while
// an Acquire of the same Provider waits for it, the release passes the key
// to the waiter instead of deleting it, and the waiter gets its handle here:
// no delete marker to hear, no second write to take the key.
//
// The waiter's token is a revision of our entry in the key (see entry)
// written after the holder's grant: a write of ours that expected the
// revision before it, so the key held our entry all along and no one else
// was granted it in between, and, the bucket's revisions being one
// increasing sequence, a token strictly greater than every token granted
// before it. Every write of ours to the entry leaves such a spare revision:
// the renewals, the write a holder makes in the background as soon as a
// local waiter lines up behind it (two, so that one stays spare), and the
// write every handed-on grant makes in the background at once, which also
// puts its token in the value for Holder. So a release usually finds a
// spare and hands the key on without a round trip: the oldest spare is the
// waiter's token, the owner value stays, and the new lease starts when our
// latest write started, as after a renewal. Without a spare (a write still
// in flight is waited for first), the release writes one itself, one round
// trip, expecting the holder's last revision.
//
// A spare is only handed on while the latest write is younger than half a
// renewal interval and the keeper has not found the holder lost, so the
// new lease is as sound as a freshly renewed one: the server cannot have
// expired the key. Nor is it handed on once the Provider's watcher of the
// key has relayed a delete marker newer than our last write, or while the
// watcher is down: a key deleted by hand is then found at once, and only a
// delete made within the watcher's delivery delay before the release (well
// under a millisecond) can go unseen until the next renewal (doc.go says
// what that means for the token). A
// release that writes itself is a compare-and-set on the holder's last
// revision: a stale or lost handle cannot hand on a key it no longer
// holds, and a waiter's own acquire (expecting a delete marker) and a
// handoff never both succeed. When that write fails the release falls
// back to the Delete, and the waiter goes on waiting.
//
// Fairness: waiters in other processes learn of a release only from the
// delete marker, which a handoff never writes. So a Provider hands a key
// on locally at most WithLocalHandoff times in a row (default 8), and not
// once the run of local grants has lasted defaultHandoffSpan (20 ms); the
// release after that deletes the key without waking this Provider's
// waiters directly: they hear the marker from the watcher, as waiters in
// other processes do, and all race for the key on equal terms. A remote
// waiter is thus passed over for at most that many local grants, or that
// long, per delete it hears.

// defaultHandoffSpan bounds a run of local handoffs in time, whatever the
// count: with long holds a handoff saves little (a round trip per hold)
// while each one keeps the remote waiters out for a whole hold.
const defaultHandoffSpan = 20 * time.Millisecond

// defaultHandoffs is the default longest run of consecutive local handoffs.
// It is longer than pglock's (4): the release that ends a run costs a
// delete, a watch delivery and a create here, about 0.4 ms against 30 µs
// for a handoff, and with runs of 4 that one release in five was most of
// the time lost (81 % utilization against 85 % with 8 in the same period),
// while the waits of another process's contenders hardly changed (p99 28–56
// ms with 4, 34–55 ms with 8, two processes × 4 contenders).
const defaultHandoffs = 8

// waitLocal is Provider.wait for the primitives that take local handoffs.
// The caller lines up behind the earlier waiters of this Provider for
// watchKey; once first, it waits as Provider.wait does, except that each
// attempt first looks for a grant that a local release handed it.
func (p *Provider) waitLocal(ctx context.Context, name, watchKey string, try kit.Attempt) (core.Handle, error) {
	if p.cfg.handoffs == 0 {
		return p.wait(ctx, name, watchKey, try)
	}
	if ctx.Err() != nil {
		return nil, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: kit.NotAcquired(ctx)}
	}
	w, first := p.handoff.Enqueue(watchKey, "")
	if first {
		p.reserveFor(watchKey)
	}
	var h core.Handle
	var err error
	select {
	case <-w.Turn():
		h, err = p.waitGated(ctx, name, watchKey, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok, next := p.handoff.Take(watchKey, w); ok {
				if next {
					p.reserveFor(watchKey)
				}
				return g, 0, nil
			}
			if l, ok := p.handoff.Holder(watchKey); ok && !l.lost() {
				// Held here: a write could only fail. The release hands
				// the key to us, or deletes it and wakes us.
				return nil, 0, &core.Error{Backend: backend, Op: "acquire", Name: name,
					Err: kit.Busy("held by this process (token %d)", l.value.Token)}
			}
			return try(ctx)
		})
	case <-ctx.Done():
		err = &core.Error{Backend: backend, Op: "acquire", Name: name, Err: kit.NotAcquired(ctx)}
	}
	g, handed, next := p.handoff.Leave(watchKey, w)
	if next {
		p.reserveFor(watchKey)
	}
	if !handed {
		return h, err
	}
	// A handoff landed after the last look. Our own attempt cannot also
	// have succeeded (both are compare-and-sets on the same key), but a
	// handle is never dropped unreleased. A wait that ended with its
	// context gives the grant up (to the next in line, if any) before
	// returning the error, as a grant racing a cancellation must be; one
	// that ended with another error (a failed request) returns the grant,
	// which is good.
	if err == nil || ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = g.Release(rctx)
		cancel()
		return h, err
	}
	return g, nil
}

// reserveFor asks key's local holder, now that a waiter is first in line
// behind it, to reserve a revision for the handoff (see lease.reserve).
func (p *Provider) reserveFor(key string) {
	if l, ok := p.handoff.Holder(key); ok && l.mayHandOff() {
		l.reserve(false)
	}
}

// mayHandOff reports whether a release of l could hand the key on now,
// waiter aside: handoffs are on for its kind, the run of local handoffs is
// within its bounds and the Provider is open.
func (l *lease) mayHandOff() bool {
	return l.handoff && !l.runEnded() && !l.p.isClosed.Load()
}

// runEnded reports whether the run of local handoffs that l belongs to has
// reached its bounds.
func (l *lease) runEnded() bool {
	return l.run >= l.p.cfg.handoffs || time.Since(l.runStart) >= l.p.cfg.handoffSpan
}

// handoffTarget returns the waiter this release may hand the key to, or
// nil when it must delete the key.
func (l *lease) handoffTarget() *kit.Waiter[*handle] {
	if !l.mayHandOff() {
		return nil
	}
	return l.p.handoff.Claim(l.watchKey)
}

// reserve rewrites the key with l's value in the background, as a renewal
// does, until it has written once if named is set (the value then names
// l's token) and, while l may still hand the key on, until the entry has
// maxSpare spare revisions. It stops at the first failure: the release
// then writes itself, and a lost key is the keeper's to find. Each write is
// bounded by the Provider's timeout; Close waits for them.
func (l *lease) reserve(named bool) {
	l.p.goBackground(func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), l.p.cfg.timeout)
			rev, end, ok := l.beginWrite(ctx)
			if ok && !named {
				l.e.mu.Lock()
				ok = len(l.e.spare) < maxSpare && l.mayHandOff()
				l.e.mu.Unlock()
				if !ok {
					end()
				}
			}
			if !ok {
				cancel()
				return
			}
			start := time.Now()
			seq, err := l.p.write(ctx, l.key, l.value.encode(), rev)
			if err == nil {
				l.e.advance(seq, start)
			}
			end()
			cancel()
			if err != nil {
				return
			}
			named = false
		}
	})
}

// goBackground runs fn on a goroutine that Close waits for, unless the
// Provider is closed.
func (p *Provider) goBackground(fn func()) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
}

// handOff passes the key to waiter w. It reports whether the key left us:
// then the waiter holds it (or, if the waiter left meanwhile, it was
// released on), and err is the error of that release. When the handoff
// cannot be made, the waiter is given back and the caller deletes the key.
func (l *lease) handOff(ctx context.Context, w *kit.Waiter[*handle]) (bool, error) {
	e := l.e
	lost := l.lost()
	// The watcher relays every delete marker of the key: with it live and
	// no marker seen past our last write, nobody deleted the key by hand
	// before the last moment the watcher could tell.
	watched := l.p.watchLive(l.watchKey)
	for {
		e.mu.Lock()
		if !lost && watched && l.p.hints.get(l.key) < e.rev && len(e.spare) > 0 && time.Since(e.revAt) < l.p.cfg.ttl/6 {
			// No round trip. The keeper renews every TTL/3: a lease
			// confirmed less than half of that ago needs nothing yet.
			token, revAt := e.spare[0], e.revAt
			e.spare = slices.Delete(e.spare, 0, 1)
			e.mu.Unlock()
			v := value{ID: l.p.cfg.identity, Owner: e.owner, Token: token}
			return true, l.deliver(ctx, w, l.p.grant(l.next(v), revAt), true)
		}
		if wr := e.writing; wr != nil {
			// A write of ours is in flight: its revision may be the spare.
			e.mu.Unlock()
			select {
			case <-wr:
				continue
			case <-ctx.Done():
				l.p.handoff.Unclaim(w)
				return false, nil
			}
		}
		rev, end := e.rev, e.startWrite()
		e.mu.Unlock()
		// Write the waiter's grant ourselves. Token 0 in the value: the
		// token is this write's revision, as after an acquire.
		start := time.Now()
		v := value{ID: l.p.cfg.identity, Owner: e.owner}
		seq, err := l.p.write(ctx, l.key, v.encode(), rev)
		if err == nil {
			e.mu.Lock()
			e.rev, e.revAt, e.spare = seq, start, nil
			e.mu.Unlock()
		}
		end()
		if err != nil {
			// A write that failed for another reason than a moved
			// revision may have landed after all; the Delete that follows
			// finds it by the owner.
			l.p.handoff.Unclaim(w)
			return false, nil
		}
		v.Token = seq
		return true, l.deliver(ctx, w, l.p.grant(l.next(v), start), false)
	}
}

// next is the lease of the grant that l hands on with value v.
func (l *lease) next(v value) *lease {
	return &lease{p: l.p, name: l.name, key: l.key, watchKey: l.watchKey, e: l.e, value: v,
		handoff: true, run: l.run + 1, runStart: l.runStart}
}

// lost reports whether the keeper found l's lease gone before the release.
func (l *lease) lost() bool {
	return l.base == nil || errors.Is(context.Cause(l.base.Context()), core.ErrLockLost)
}

// deliver gives h to waiter w and wakes it. h's lease then rewrites the key
// in the background: at once when named says the value names an earlier
// grant's token (for Holder in other processes), and to keep spares for
// the next handoff. When the waiter left meanwhile, h is released on
// instead, which hands it to the next waiter or frees it: the run bound
// ends such a chain.
func (l *lease) deliver(ctx context.Context, w *kit.Waiter[*handle], h *handle, named bool) error {
	if !l.p.handoff.Deliver(w, h) {
		return h.Release(ctx)
	}
	if named || h.lease.mayHandOff() {
		h.lease.reserve(named)
	}
	// The waiter subscribes to watchKey; its next attempt takes the grant.
	l.p.notify.Notify(l.watchKey)
	return nil
}
