package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
)

// BaseHandle implements Handle for backends: it owns the handle's context,
// makes Release idempotent and keeps the fencing token. A backend makes one
// with NewHandle once the lock is granted and returns it (or embeds it).
type BaseHandle struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	token   uint64
	release func(context.Context) error

	mu        sync.Mutex
	released  bool
	stopLease func() // set by Keeper.Keep; stops renewal before the release
}

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
	h.cancel(ErrReleased)
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
	if why == nil || errors.Is(why, ErrLockLost) {
		h.cancel(cmp.Or(why, ErrLockLost))
		return
	}
	h.cancel(fmt.Errorf("%w: %w", ErrLockLost, why))
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
