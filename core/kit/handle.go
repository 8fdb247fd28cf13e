package kit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
)

// BaseHandle implements Handle for backends: it owns the handle's context,
// makes Release idempotent and keeps the fencing token. A backend makes one
// with NewHandle once the lock is granted and returns it (or embeds it).
//
// It also implements LeaseReporter: a Keeper that keeps the handle records
// each renewal's outcome in it.
//
// The context is clock-aware while a Keeper keeps the handle: its Err and
// Done compare the clock with the end of the lease's trust window, and end
// the context with ErrLockLost on the spot once the window has closed (see
// WithCheck). So the first check after a freeze (a GC pause, a VM freeze,
// SIGSTOP) reads the lock as lost even when the Keeper's timer has not
// fired yet, and core.Held(h) is the same as h.Context().Err() == nil.
type BaseHandle struct {
	ctx     context.Context // base with the trust-window check; what Context returns
	base    context.Context // ended by cancel; read under mu, where checking would deadlock
	cancel  context.CancelCauseFunc
	trusted atomic.Pointer[trustWindow] // nil while no window can close
	token   uint64
	release func(context.Context) error
	probe   atomic.Pointer[handleProbe]         // set once a Probe's Locker returns the handle; nil: nothing to report
	verify  func(context.Context) (bool, error) // set by SetVerify before the handle is shared; nil: Verify is unsupported

	mu        sync.Mutex
	released  bool
	handoff   string // how the grant came: "" (an attempt), "local" or "server"; see core.Event.Handoff
	stopLease func() // set by Keeper.Keep; stops renewal before the release
	lease     core.LeaseState
	kept      bool          // a Keeper has set lease
	changed   chan struct{} // closed at the next change; nil until someone asks
}

var (
	_ core.LeaseReporter = (*BaseHandle)(nil)
	_ core.Verifier      = (*BaseHandle)(nil)
)

// NewHandle returns a handle for a granted lock. release gives the lock up on
// the backend; it is called at most once, after the handle's context has been
// cancelled with ErrReleased and its lease (if any) has stopped renewing.
func NewHandle(token uint64, release func(context.Context) error) *BaseHandle {
	base, cancel := context.WithCancelCause(context.Background())
	h := &BaseHandle{base: base, cancel: cancel, token: token, release: release}
	h.ctx = WithCheck(base, h.checkTrust)
	return h
}

// SetVerify gives the handle the backend's way to ask its store whether
// the grant still holds (core.Verifier); set it before the handle is
// returned. Without it Verify fails with an error matching
// core.ErrUnsupported.
func (h *BaseHandle) SetVerify(f func(ctx context.Context) (held bool, err error)) {
	h.verify = f
}

// Verify implements core.Verifier: false at once when the handle is
// released or lost, else the store's answer through the function given to
// SetVerify.
func (h *BaseHandle) Verify(ctx context.Context) (bool, error) {
	if h.Context().Err() != nil {
		return false, nil
	}
	if h.verify == nil {
		return false, fmt.Errorf("%w: this backend cannot confirm a grant with its store", core.ErrUnsupported)
	}
	return h.verify(ctx)
}

// trustWindow is the end of a handle's trust window, on the clock of the
// Keeper that keeps the handle.
type trustWindow struct {
	deadline time.Time
	clock    Clock
}

// checkTrust ends the context with ErrLockLost when the trust window has
// closed by the clock. The fast path, taken on every Err and Done, is an
// atomic load and a clock read.
func (h *BaseHandle) checkTrust() {
	w := h.trusted.Load()
	if w == nil || w.clock.Now().Before(w.deadline) {
		return
	}
	h.mu.Lock()
	// A renewal may have moved the window on since the load above.
	if w = h.trusted.Load(); w == nil || w.clock.Now().Before(w.deadline) {
		h.mu.Unlock()
		return
	}
	lost := h.loseLocked(trustClosed(h.lease.Err))
	h.mu.Unlock()
	lost.report(h.token)
}

// Context is done once the lock is no longer held; see Handle.
func (h *BaseHandle) Context() context.Context { return h.ctx }

// FencingToken returns the token granted with the lock.
func (h *BaseHandle) FencingToken() uint64 { return h.token }

// Release cancels the handle's context with ErrReleased, stops its lease and
// gives the lock up on the backend. Calls after the first return nil.
func (h *BaseHandle) Release(ctx context.Context) error {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return nil
	}
	h.released = true
	var p *handleProbe
	if h.base.Err() == nil { // else it was lost, and reported so
		p = h.probe.Load()
	}
	// Cancel first, under the lock so a concurrent Lose cannot win: the
	// protected work must stop before anyone else can get the lock, and a
	// lease failure seen from now on must not read as lost.
	h.cancel(core.ErrReleased)
	h.notifyLocked()
	stop := h.stopLease
	h.mu.Unlock()

	if stop != nil {
		stop()
	}
	if p == nil {
		return h.release(ctx)
	}
	start := time.Now()
	err := h.release(ctx)
	p.released(ctx, h.token, start, err)
	return err
}

// Lose marks the lock as lost: the context is cancelled with a cause that
// wraps both ErrLockLost and why. It does nothing after Release or an earlier
// Lose. Lose does not release the lock on the backend; the holder still calls
// Release, which cleans up whatever is left.
func (h *BaseHandle) Lose(why error) {
	h.mu.Lock()
	lost := h.loseLocked(why)
	h.mu.Unlock()
	lost.report(h.token)
}

// loseLocked is Lose with h.mu held. When it ends the context it returns
// the loss to report once h.mu is released, to the probe attached by then:
// the probe is attached under h.mu too, so exactly one of the two reports
// a loss (see attach).
func (h *BaseHandle) loseLocked(why error) loss {
	if h.released || h.base.Err() != nil {
		return loss{}
	}
	defer h.notifyLocked()
	if why == nil || errors.Is(why, core.ErrLockLost) {
		why = cmp.Or(why, core.ErrLockLost)
	} else {
		why = fmt.Errorf("%w: %w", core.ErrLockLost, why)
	}
	h.cancel(why)
	return loss{h.probe.Load(), why}
}

// Released reports whether Release has been called.
func (h *BaseHandle) Released() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

func (h *BaseHandle) setStopLease(stop func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return false
	}
	h.stopLease = stop
	return true
}

// Lease returns the state of the handle's lease as its Keeper last recorded
// it, and false when no Keeper keeps the handle. After the context ends it
// keeps returning the last state recorded.
func (h *BaseHandle) Lease() (core.LeaseState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease, h.kept
}

// LeaseChanged returns a channel that is closed at the next change of the
// lease's state (a renewal that succeeds or fails) and when the handle's
// context ends; once the context has ended it returns a closed channel. The
// channel is made on the first call after a change, so a handle that nobody
// watches costs nothing.
func (h *BaseHandle) LeaseChanged() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base.Err() != nil {
		return h.base.Done()
	}
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

// setLease records a new state of the lease, whose Deadline is on clock;
// the Keeper calls it. Nothing changes once the context has ended: the
// lease is over.
func (h *BaseHandle) setLease(s core.LeaseState, clock Clock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base.Err() != nil {
		return
	}
	h.lease, h.kept = s, true
	if s.Deadline.IsZero() {
		h.trusted.Store(nil)
	} else {
		h.trusted.Store(&trustWindow{deadline: s.Deadline, clock: clock})
	}
	h.notifyLocked()
}

// notifyLocked wakes the watchers of LeaseChanged; h.mu is held.
func (h *BaseHandle) notifyLocked() {
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}
