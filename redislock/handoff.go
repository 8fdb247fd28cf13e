package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// Local handoff (kit.Handoffs owns the policy: the line, the run bounds,
// grants to waiters that gave up). When a holder releases a mutex while an
// Acquire of the same Provider waits for it, the release leaves the key
// held by the same owner value and gives the waiter a new handle on it: one
// script (mutex_spare.lua) instead of the release script, a PUBLISH and an
// acquire script.
//
// That script draws the waiter's token (server time, kept above every
// token the key names), records it in the key's value and renews the key,
// and it does so only while the key still holds our owner value. So the
// token is larger than every token granted before, and a key that expired
// or was deleted by hand is never handed on: the draw fails, the release
// runs its script as usual (which finds nothing of ours), and the waiter
// contends on the server. The new lease starts when the draw started, as
// after a renewal.
//
// While the key is held by a live local grant, the first waiter of the
// line waits locally, without queueing on the server, for the release to
// hand the key over or to wake it after releasing. A waiter that has
// queued on the server (the key was held elsewhere) is never handed a key
// locally, so a grant can never reach it both ways. Waiters in other
// processes are granted the key only by the release script, which a
// handoff does not run: a run is bounded (WithLocalHandoff).

// lease is a mutex grant of this Provider: what a release needs to hand
// the key on.
type lease struct {
	p     *Provider
	grant redisop.Grant
	line  string  // the key's line in Provider.hand: its lock key
	run   kit.Run // the grant's place in a run of local handoffs
	h     *handle
}

// newMutexHandle returns the handle of a mutex grant and records it as its
// key's local holder.
func (p *Provider) newMutexHandle(g redisop.Grant, token uint64, start time.Time, run kit.Run) *handle {
	ls := &lease{p: p, grant: g, line: p.client.Key(g.Lock), run: run}
	h := &handle{p: p, grant: g, lease: ls}
	ls.h = h
	h.BaseHandle = kit.NewHandle(token, ls.release)
	p.hand.SetHolder(ls.line, ls)
	p.keeper.Keep(h.BaseHandle, start, ls) // ls, not g: no boxing
	return h
}

// lost reports whether the keeper found the lease gone.
func (ls *lease) lost() bool {
	return errors.Is(context.Cause(ls.h.Context()), core.ErrLockLost)
}

// release is the handle's release: it hands the key to the first local
// waiter when it may, and otherwise runs the release script and wakes that
// waiter to contend.
func (ls *lease) release(ctx context.Context) error {
	p := ls.p
	if !p.closed.Load() && !ls.lost() {
		if handed, err := p.hand.Pass(ctx, ls.line, ls.run, ls.handOn); handed {
			return err
		}
	}
	_, err := p.client.Release(ctx, ls.grant)
	p.hand.DropHolder(ls.line, ls)
	p.wakeFirst(ls.line)
	if err != nil {
		return kit.Wrap(backend, "release", ls.grant.Lock.Name, err)
	}
	return nil // released, or already gone: either way not held
}

// handOn is the step of kit.Handoffs.Pass: it draws the waiter's token,
// which succeeds only while the key holds our owner value, and returns the
// waiter's grant.
func (ls *lease) handOn(ctx context.Context, run kit.Run) (*handle, error) {
	start := time.Now()
	tok, err := ls.p.client.DrawToken(ctx, ls.grant, ls.p.cfg.ttl, 0)
	if err != nil {
		return nil, err
	}
	if tok == 0 {
		return nil, core.ErrLockLost
	}
	return ls.p.newMutexHandle(ls.grant, tok, start, run), nil
}

// wakeFirst wakes the first waiter of line, which waits locally while the
// key is held here, to contend for it.
func (p *Provider) wakeFirst(line string) {
	if tag, ok := p.hand.First(line); ok {
		p.waker.Notify(tag)
	}
}
