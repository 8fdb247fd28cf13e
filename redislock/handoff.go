package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// Local handoff. When a holder releases a mutex while an Acquire of the
// same Provider waits for it, the release leaves the key as it is (same
// owner value, same expiry) and gives the waiter a new handle on it: no
// release script, no PUBLISH, no acquire script. A contended handoff
// between goroutines of one process then costs no round trip at all.
//
// The waiter's fencing token must still be strictly greater than every
// earlier grant's. As soon as a waiter stands first in line behind a local
// holder, the holder draws a spare token in the background (one script,
// mutex_spare.lua: server time, kept above every token the key names) while
// it holds the key, and records it in the key's value as
// "<owner>:<token>/<spare>". It is drawn while the key is ours, so it is
// larger than our token and than every token before it, and smaller than
// the token of any grant made after the key is next released, since those
// are drawn later on the same clock and above it (mutex_release.lua counts
// the spare). The draw also renews the key, so the lease of the grant it
// becomes starts when the draw started, as after a renewal. A release hands
// the spare on without I/O while it is younger than TTL/6 (the keeper
// renews every TTL/3, so such a lease needs nothing yet) and the holder was
// not found lost; otherwise it draws a token itself (one round trip, still
// cheaper than a release and an acquire). Once handed on, the new holder
// records its token in the value in the background, drawing its own spare
// with the same call, so Holder in other processes names it within a round
// trip.
//
// A handle that was lost hands nothing on, and a draw fails when the key no
// longer holds our owner value (expired, or deleted by hand): the release
// then runs its script as usual, and the waiter contends on the server. A
// key deleted by hand after the last draw goes unseen by a handoff, as it
// goes unseen by a holder until its next renewal: the new holder is lost
// at its next renewal, and a grant made meanwhile elsewhere has a larger
// token, so fencing still orders them.
//
// Waiters of one Provider for a key line up locally in arrival order
// (kit.Handoffs): only the first contends, and while the key is held by a
// live local grant it waits locally, without queueing on the server, for
// the release to hand the key over or to wake it after releasing. A waiter
// that has queued on the server (the key was held elsewhere) is never
// handed a key locally, so a grant can never reach it both ways.
//
// Fairness: waiters in other processes queue on the server and are granted
// the key by a release script, which a handoff does not run. So a run of
// local handoffs is bounded: at most WithLocalHandoff grants in a row
// (default 8) and none once the run has lasted 20 ms; the release that ends
// a run runs the release script, which hands the key to the first waiter
// queued on the server if there is one. A waiter elsewhere is thus passed
// over for at most that many local grants, or about that long, per release
// script.

// DefaultLocalHandoffs is the default longest run of consecutive local
// handoffs (WithLocalHandoff).
const DefaultLocalHandoffs = 8

// defaultHandoffSpan bounds a run of local handoffs in time, whatever the
// count: with long holds a handoff saves little while each one keeps the
// waiters of other processes out for a whole hold.
const defaultHandoffSpan = 20 * time.Millisecond

// lease is a mutex grant of this Provider: what a release needs to hand
// the key on.
type lease struct {
	p        *Provider
	grant    redisop.Grant
	line     string // the key's line in Provider.hand: its lock key
	run      int    // local handoffs that led to this grant since a grant by the server
	runStart time.Time
	h        *handle

	mu      sync.Mutex
	done    bool          // release has begun: draw nothing more
	spare   uint64        // a token drawn for the next holder, 0 if none
	spareAt time.Time     // when the draw of spare started
	drawing chan struct{} // closed when the draw in flight ends; nil if none
}

// newMutexHandle returns the handle of a mutex grant and records it as its
// key's local holder.
func (p *Provider) newMutexHandle(g redisop.Grant, token uint64, start time.Time, run int, runStart time.Time) *handle {
	ls := &lease{p: p, grant: g, line: p.client.Key(g.Lock), run: run, runStart: runStart}
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

// mayHandOff reports whether a release of ls could hand the key on now,
// waiter aside: handoffs are on, the run is within its bounds and the
// Provider is open.
func (ls *lease) mayHandOff() bool {
	c := &ls.p.cfg
	return ls.run < c.handoffs && time.Since(ls.runStart) < c.handoffSpan && !ls.p.closed.Load()
}

// reserve draws a spare token in the background unless one is at hand or
// being drawn, or the release has begun. With record it draws even when a
// spare is at hand: ls was handed on, and the draw records its token in the
// value.
func (ls *lease) reserve(record bool) {
	ls.mu.Lock()
	if ls.done || ls.drawing != nil || (!record && ls.spareFresh()) {
		ls.mu.Unlock()
		return
	}
	d := make(chan struct{})
	ls.drawing = d
	ls.mu.Unlock()
	ran := ls.p.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		start := time.Now()
		tok, err := ls.p.client.DrawToken(ctx, ls.grant, ls.p.cfg.ttl, ls.h.FencingToken())
		ls.mu.Lock()
		if err == nil && tok != 0 {
			ls.spare, ls.spareAt = tok, start
		}
		ls.drawing = nil
		ls.mu.Unlock()
		close(d)
	})
	if !ran {
		ls.mu.Lock()
		ls.drawing = nil
		ls.mu.Unlock()
		close(d)
	}
}

// spareFresh reports whether ls has a spare young enough to hand on
// without I/O (see handOff). ls.mu is held.
func (ls *lease) spareFresh() bool {
	return ls.spare != 0 && time.Since(ls.spareAt) < ls.p.cfg.ttl/6
}

// release is the handle's release: it hands the key to the first local
// waiter when it may, and otherwise runs the release script and wakes that
// waiter to contend.
func (ls *lease) release(ctx context.Context) error {
	p := ls.p
	ls.mu.Lock()
	ls.done = true
	ls.mu.Unlock()
	if ls.mayHandOff() && !ls.lost() {
		if w := p.hand.Claim(ls.line); w != nil {
			if handed, err := ls.handOff(ctx, w); handed {
				return err
			}
		}
	}
	_, err := p.client.Release(ctx, ls.grant)
	p.hand.DropHolder(ls.line, ls)
	p.wakeFirst(ls.line)
	if err != nil {
		return p.wrap("release", ls.grant.Lock.Name, err)
	}
	return nil // released, or already gone: either way not held
}

// handOff passes the key to the claimed waiter w. It reports whether the
// key left us: the waiter then holds it (or, if it left meanwhile, it was
// released on), and err is the error of that release. When the handoff
// cannot be made, w is given back and the caller releases the key.
func (ls *lease) handOff(ctx context.Context, w *kit.Waiter[*handle]) (bool, error) {
	p := ls.p
	for {
		ls.mu.Lock()
		if ls.spareFresh() {
			tok, at := ls.spare, ls.spareAt
			ls.spare = 0
			ls.mu.Unlock()
			return true, ls.deliver(ctx, w, tok, at, true)
		}
		d := ls.drawing
		ls.mu.Unlock()
		if d == nil {
			break
		}
		select {
		case <-d: // its spare may do
		case <-ctx.Done():
			p.hand.Unclaim(w)
			return false, nil
		}
	}
	// No spare: draw the waiter's token now, recorded as the value's.
	start := time.Now()
	tok, err := p.client.DrawToken(ctx, ls.grant, p.cfg.ttl, 0)
	if err != nil || tok == 0 {
		// Not ours any more, or unknown: the release script finds out.
		p.hand.Unclaim(w)
		return false, nil
	}
	return true, ls.deliver(ctx, w, tok, start, false)
}

// deliver gives waiter w a grant of the key with token, whose lease started
// at start. record says the value does not name token yet: the new holder
// then records it in the background. When w left meanwhile the grant is
// released on at once, which hands it to the next waiter or frees the key;
// the run bound ends such a chain.
func (ls *lease) deliver(ctx context.Context, w *kit.Waiter[*handle], token uint64, start time.Time, record bool) error {
	p := ls.p
	h := p.newMutexHandle(ls.grant, token, start, ls.run+1, ls.runStart)
	if !p.hand.Deliver(w, h) {
		return h.Release(ctx)
	}
	p.waker.Notify(w.Tag())
	if record {
		h.lease.reserve(true)
	}
	return nil
}

// wakeFirst wakes the first waiter of line, which waits locally while the
// key is held here, to contend for it.
func (p *Provider) wakeFirst(line string) {
	if tag, ok := p.hand.First(line); ok {
		p.waker.Notify(tag)
	}
}

// goBackground runs fn on a goroutine that Close waits for. It reports
// false, running nothing, once the Provider is closed.
func (p *Provider) goBackground(fn func()) bool {
	p.bgMu.Lock()
	defer p.bgMu.Unlock()
	if p.bgClosed {
		return false
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		fn()
	}()
	return true
}
