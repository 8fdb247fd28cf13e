package natslock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Local handoff (kit.Handoffs owns the policy: the line, the run bounds,
// grants to waiters that gave up). When a holder releases a mutex (or a
// semaphore slot) while an Acquire of the same Provider waits for it, the
// release passes the key to the waiter instead of deleting it: one write,
// no delete marker to hear, no second write to take the key.
//
// The waiter's token is the revision of that write: our entry rewritten
// expecting the holder's last revision. It lands only while the key holds
// our entry, unchanged since we wrote it, so no one else was granted the
// key in between, and, the bucket's revisions being one increasing
// sequence, the token is strictly greater than every token granted before
// it. A key deleted or overwritten by hand fails the write; the release
// then falls back to the delete (which finds nothing of ours), and the
// waiter goes on waiting. A waiter's own acquire (expecting a delete
// marker) and a handoff never both succeed.
//
// Fairness: waiters in other processes get the key only from a release
// that leaves this Provider. So a run is bounded (WithLocalHandoff); the
// release that ends one hands a mutex to the first waiter of its line
// (line.go), or deletes the key without waking this Provider's waiters
// directly: they hear the marker from the watcher, as waiters in other
// processes do, and all race for the key on equal terms.

// waitLocal is Provider.wait for the primitives that take local handoffs.
// The caller lines up behind the earlier waiters of this Provider for
// watchKey; once first, it waits as Provider.wait does, except that each
// attempt first looks for a grant that a local release handed it.
func (p *Provider) waitLocal(ctx context.Context, name, watchKey string, b kit.Backoff, try kit.Attempt) (core.Handle, error) {
	if !p.handoff.On() {
		return p.wait(ctx, name, watchKey, b, try)
	}
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	h, err := p.handoff.Wait(ctx, watchKey, watchKey, func(ctx context.Context, w *kit.Waiter[*handle]) (core.Handle, error) {
		return p.waitGated(ctx, name, watchKey, b, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok := p.handoff.Take(watchKey, w); ok {
				return g, 0, nil
			}
			if l, ok := p.handoff.Holder(watchKey); ok && !l.lost() {
				// Held here: a write could only fail. The release hands
				// the key to us, or deletes it and wakes us.
				return nil, 0, kit.Wrap(backend, "acquire", name, kit.Busy("held by this process (token %d)", l.value.Token))
			}
			return try(ctx)
		})
	})
	return h, kit.Wrap(backend, "acquire", name, err)
}

// handOn is the step of kit.Handoffs.Pass: it rewrites our entry expecting
// the holder's last revision (waiting for a write of ours in flight first)
// and returns the waiter's grant, whose token is that revision.
func (l *lease) handOn(ctx context.Context, run kit.Run) (*handle, error) {
	if l.lost() {
		return nil, core.ErrLockLost
	}
	e := l.e
	if !e.lockIdle(ctx) {
		return nil, ctx.Err()
	}
	rev, end := e.rev, e.startWrite()
	e.mu.Unlock()
	// Token 0 in the value: the token is this write's revision, as after
	// an acquire.
	start := time.Now()
	v := value{ID: l.p.cfg.identity, Owner: e.owner, Inbox: l.value.Inbox}
	seq, err := l.p.write(ctx, l.key, v.encode(), rev)
	if err == nil {
		e.advance(seq, start)
	}
	end()
	if err != nil {
		// A write that failed for another reason than a moved revision
		// may have landed after all; the delete that follows finds it by
		// the owner.
		return nil, err
	}
	v.Token = seq
	next := &lease{p: l.p, name: l.name, key: l.key, watchKey: l.watchKey, e: e, value: v,
		handoff: true, line: l.line, run: run}
	return l.p.grant(next, start), nil
}

// lost reports whether the keeper found l's lease gone before the release.
func (l *lease) lost() bool {
	return l.base == nil || errors.Is(context.Cause(l.base.Context()), core.ErrLockLost)
}
