package kit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distlock/distlock/core"
)

// BaseHandle implements Handle for backends: it owns the handle's context,
// makes Release idempotent and keeps the fencing token. A backend makes one
// with NewHandle once the lock is granted and returns it (or embeds it).
//
// It also implements LeaseReporter: a Keeper that keeps the handle records
// each renewal's outcome in it.
type BaseHandle struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	token   uint64
	release func(context.Context) error

	mu        sync.Mutex
	released  bool
	stopLease func() // set by Keeper.Keep; stops renewal before the release
	lease     core.LeaseState
	kept      bool          // a Keeper has set lease
	changed   chan struct{} // closed at the next change; nil until someone asks
}

var _ core.LeaseReporter = (*BaseHandle)(nil)

// NewHandle returns a handle for a granted lock. release gives the lock up on
// the backend; it is called at most once, after the handle's context has been
// cancelled with ErrReleased and its lease (if any) has stopped renewing.
func NewHandle(token uint64, release func(context.Context) error) *BaseHandle {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &BaseHandle{ctx: ctx, cancel: cancel, token: token, release: release}
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
	return h.release(ctx)
}

// Lose marks the lock as lost: the context is cancelled with a cause that
// wraps both ErrLockLost and why. It does nothing after Release or an earlier
// Lose. Lose does not release the lock on the backend; the holder still calls
// Release, which cleans up whatever is left.
func (h *BaseHandle) Lose(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	defer h.notifyLocked()
	if why == nil || errors.Is(why, core.ErrLockLost) {
		h.cancel(cmp.Or(why, core.ErrLockLost))
		return
	}
	h.cancel(fmt.Errorf("%w: %w", core.ErrLockLost, why))
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
	if h.ctx.Err() != nil {
		return h.ctx.Done()
	}
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

// setLease records a new state of the lease; the Keeper calls it. Nothing
// changes once the context has ended: the lease is over.
func (h *BaseHandle) setLease(s core.LeaseState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	h.lease, h.kept = s, true
	h.notifyLocked()
}

// notifyLocked wakes the watchers of LeaseChanged; h.mu is held.
func (h *BaseHandle) notifyLocked() {
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}
