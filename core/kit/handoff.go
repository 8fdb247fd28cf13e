package kit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
)

// Local handoff. When a grant is released while an acquire of the same
// process waits for the same lock, the release can hand the lock straight
// to that waiter instead of freeing it on the backend: no free, no wake-up
// of the next contender, no second acquire. Handoffs owns the policy; a
// backend supplies, through Pass, only the step that makes the waiter's
// grant.
//
// Fencing: the waiter's token is drawn by the release itself, in one round
// trip that succeeds only while the backend still gives the lock to the
// releasing grant (a compare-and-set on the revision it holds, a script
// that checks the owner value, a statement on the session that holds the
// lock). So the token is larger than every token granted before, here or
// anywhere, and a lock broken from outside (deleted key, terminated
// session) is never handed on: the draw fails and the release frees the
// lock as usual. A token drawn ahead of the release could not promise that:
// the lock can be broken and granted elsewhere, with a larger token, after
// the draw.
//
// Fairness: waiters in other processes are only granted the lock when it is
// freed on the backend, which a handoff never does. So a run of local
// handoffs is bounded by HandoffLimits: at most Max grants in a row after
// the one the backend made, and none once the run has lasted Span; the
// release that ends a run frees the lock. A remote waiter is thus passed
// over for at most Max local grants, or about Span plus one hold, per free.

// Default bounds of a run of local handoffs, the same on every backend.
const (
	DefaultHandoffMax  = 8
	DefaultHandoffSpan = 20 * time.Millisecond
)

// HandoffLimits bounds a run of local handoffs: at most Max in a row after
// a grant by the backend (0 turns handoffs off), and none once the run has
// lasted Span.
type HandoffLimits struct {
	Max  int
	Span time.Duration
}

// DefaultHandoffLimits returns the limits every backend starts from.
func DefaultHandoffLimits() HandoffLimits {
	return HandoffLimits{Max: DefaultHandoffMax, Span: DefaultHandoffSpan}
}

// Validate returns an error matching core.ErrInvalidArgument, naming
// backend, when Max is negative or, with handoffs on, Span is not positive.
func (l HandoffLimits) Validate(backend string) error {
	switch {
	case l.Max < 0:
		return Invalid("%s: local handoff run %d is negative", backend, l.Max)
	case l.Max > 0 && l.Span <= 0:
		return Invalid("%s: local handoff span %v is not positive", backend, l.Span)
	}
	return nil
}

// Run is a grant's place in a run of local handoffs: how many handoffs led
// to it since the backend granted the lock, and when that was.
type Run struct {
	n     int
	start time.Time
}

// StartRun is the run of a grant the backend made at start.
func StartRun(start time.Time) Run { return Run{start: start} }

// Len returns how many handoffs in a row led to the grant.
func (r Run) Len() int { return r.n }

// Handoffs is one Provider's local handoff: per key, the line of waiting
// acquires in arrival order and the live local holder. Only the first
// waiter of a line contends on the backend while the rest wait without I/O.
//
// L is the backend's record of a local holder (compared by ==), H its
// handle. Set Limits (and Wake) before use; the zero Limits turns handoffs
// off, leaving the line.
type Handoffs[L comparable, H core.Handle] struct {
	// Limits bounds runs of handoffs.
	Limits HandoffLimits
	// Wake, when set, is called with a waiter's tag once a handoff to it
	// landed, so that its wait looks again (see Take).
	Wake func(tag string)

	mu      sync.Mutex
	lines   map[string][]*Waiter[H]
	holders map[string]L
}

// waiterState is where a waiter stands.
type waiterState uint8

const (
	waiterIdle    waiterState = iota // waiting, free to be claimed
	waiterAway                       // contending on the backend: not to be claimed
	waiterClaimed                    // a release is handing it the lock
	waiterGranted                    // the handoff landed: h is its handle
	waiterGone                       // left the line, or took its grant
)

// Waiter is one waiting acquire in its key's line.
type Waiter[H any] struct {
	turn  chan struct{} // closed when the waiter becomes first in line
	tag   string
	state waiterState
	h     H
}

// Turn is closed when the waiter becomes first in its line.
func (w *Waiter[H]) Turn() <-chan struct{} { return w.turn }

// Tag returns what the waiter was enqueued with: whatever the backend needs
// to wake it (a Notifier key, say).
func (w *Waiter[H]) Tag() string { return w.tag }

// On reports whether handoffs are on.
func (hs *Handoffs[L, H]) On() bool { return hs.Limits.Max > 0 }

// Within reports whether a release of a grant at run r may still hand the
// lock on: handoffs are on and the run is within its bounds.
func (hs *Handoffs[L, H]) Within(r Run) bool {
	return r.n < hs.Limits.Max && time.Since(r.start) < hs.Limits.Span
}

// Pass hands the lock of a grant at run r, being released, to the first
// waiter of key's line, if the run is within its bounds and that waiter is
// neither contending on the backend nor claimed by another release. grant
// makes the waiter's grant at run next: it draws a new fencing token in one
// round trip that succeeds only while the lock is still the releaser's (see
// the package's "Local handoff" above), or returns an error, and then the
// waiter goes on waiting and the caller frees the lock as usual.
//
// handed reports whether the lock left the releaser: the waiter holds it,
// or, when the waiter gave up meanwhile, the new grant was released in
// turn (handed to the next waiter, or freed) and err is that release's
// error.
func (hs *Handoffs[L, H]) Pass(ctx context.Context, key string, r Run, grant func(ctx context.Context, next Run) (H, error)) (handed bool, err error) {
	if !hs.Within(r) {
		return false, nil
	}
	w := hs.claim(key)
	if w == nil {
		return false, nil
	}
	h, err := grant(ctx, Run{n: r.n + 1, start: r.start})
	if err != nil {
		hs.unclaim(w)
		return false, nil
	}
	markHandedOn(h)
	if !hs.deliver(w, h) {
		return true, h.Release(ctx)
	}
	if hs.Wake != nil {
		hs.Wake(w.tag)
	}
	return true, nil
}

// Wait is an acquire with handoffs: it lines the caller up in key's line,
// tagged tag, and once it is first runs wait, whose attempts must each
// call Take first. When wait ends while a handoff to the waiter landed after
// its last Take, the grant is returned if wait failed for another reason
// than ctx, and otherwise released (to the next waiter, if any), as a grant
// racing a cancellation must be. A done ctx returns an error matching
// core.ErrNotAcquired and ctx.Err().
func (hs *Handoffs[L, H]) Wait(ctx context.Context, key, tag string, wait func(ctx context.Context, w *Waiter[H]) (core.Handle, error)) (core.Handle, error) {
	w, _ := hs.Enqueue(key, tag)
	var h core.Handle
	var err error
	select {
	case <-w.turn:
		h, err = wait(ctx, w)
	case <-ctx.Done():
		err = NotAcquired(ctx)
	}
	g, handed := hs.Leave(key, w)
	if !handed {
		return h, err
	}
	if h == nil && ctx.Err() == nil {
		return g, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	_ = g.Release(rctx)
	cancel()
	if h == nil && err == nil {
		err = NotAcquired(ctx)
	}
	return h, err
}

// SetHolder records l as the local holder of key.
func (hs *Handoffs[L, H]) SetHolder(key string, l L) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.holders == nil {
		hs.holders = make(map[string]L)
	}
	hs.holders[key] = l
}

// DropHolder forgets l as key's local holder, if it still is.
func (hs *Handoffs[L, H]) DropHolder(key string, l L) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h, ok := hs.holders[key]; ok && h == l {
		delete(hs.holders, key)
	}
}

// Holder returns key's local holder, if any.
func (hs *Handoffs[L, H]) Holder(key string) (L, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	l, ok := hs.holders[key]
	return l, ok
}

// Enqueue puts a new waiter at the end of key's line; first reports whether
// it is first in line already (its Turn is then closed). The waiter must
// Leave (or Take its grant) in the end.
func (hs *Handoffs[L, H]) Enqueue(key, tag string) (w *Waiter[H], first bool) {
	w = &Waiter[H]{turn: make(chan struct{}), tag: tag}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.lines == nil {
		hs.lines = make(map[string][]*Waiter[H])
	}
	line := append(hs.lines[key], w)
	hs.lines[key] = line
	if len(line) == 1 {
		close(w.turn)
		return w, true
	}
	return w, false
}

// Len returns how many waiters stand in key's line.
func (hs *Handoffs[L, H]) Len(key string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.lines[key])
}

// First returns the tag of the first waiter of key's line.
func (hs *Handoffs[L, H]) First(key string) (tag string, ok bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if line := hs.lines[key]; len(line) > 0 {
		return line[0].tag, true
	}
	return "", false
}

// Away marks an idle waiter as contending on the backend, where a grant of
// its own could land: no release claims it until Back. It returns false,
// changing nothing, when the waiter is claimed or granted already: it must
// then not contend but wait for (or take) the handoff.
func (hs *Handoffs[L, H]) Away(w *Waiter[H]) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	switch w.state {
	case waiterIdle:
		w.state = waiterAway
		return true
	case waiterAway:
		return true
	}
	return false
}

// Back makes an away waiter claimable again.
func (hs *Handoffs[L, H]) Back(w *Waiter[H]) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state == waiterAway {
		w.state = waiterIdle
	}
}

// Take returns the waiter's grant once a handoff has delivered it (ok),
// and then takes the waiter out of the line.
func (hs *Handoffs[L, H]) Take(key string, w *Waiter[H]) (h H, ok bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state != waiterGranted {
		return h, false
	}
	h = w.h
	hs.remove(key, w)
	return h, true
}

// Leave takes the waiter out of key's line. It returns a grant that a
// handoff delivered but the waiter has not taken (ok), which the caller now
// owns; a handoff still in flight finds the waiter gone and releases what
// it granted itself.
func (hs *Handoffs[L, H]) Leave(key string, w *Waiter[H]) (h H, ok bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok = w.h, w.state == waiterGranted
	hs.remove(key, w)
	return h, ok
}

// claim reserves the first waiter of key's line for a handoff: nil when
// the line is empty, or its first waiter is away or claimed.
func (hs *Handoffs[L, H]) claim(key string) *Waiter[H] {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	line := hs.lines[key]
	if len(line) == 0 || line[0].state != waiterIdle {
		return nil
	}
	line[0].state = waiterClaimed
	return line[0]
}

// unclaim gives a claimed waiter back after a failed handoff.
func (hs *Handoffs[L, H]) unclaim(w *Waiter[H]) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state == waiterClaimed {
		w.state = waiterIdle
	}
}

// deliver gives a claimed waiter its grant. It returns false when the
// waiter left meanwhile: the caller then owns h.
func (hs *Handoffs[L, H]) deliver(w *Waiter[H], h H) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if w.state != waiterClaimed {
		return false
	}
	w.state, w.h = waiterGranted, h
	return true
}

// remove takes w out of key's line, and lets the next waiter move up;
// hs.mu is held.
func (hs *Handoffs[L, H]) remove(key string, w *Waiter[H]) {
	if w.state == waiterGone {
		return
	}
	var zero H
	w.state, w.h = waiterGone, zero
	line := hs.lines[key]
	i := slices.Index(line, w)
	if i < 0 {
		return
	}
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(hs.lines, key)
		return
	}
	hs.lines[key] = line
	if i == 0 {
		close(line[0].turn)
	}
}
