package core

import (
	"context"
	"errors"
)

// Do acquires l (waiting as Acquire does), runs fn under a context that is
// done when either ctx or the lock's handle context is, and releases the
// lock. It returns fn's error joined with the release error. The release
// runs even when fn panics, and uses a context detached from ctx's
// cancellation so a cancelled caller still frees the lock at once.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) (err error) {
	h, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	work, stop := mergeCancel(ctx, h.Context())
	defer stop()
	return fn(work)
}

// mergeCancel returns a child of ctx that is also cancelled, with the same
// cause, when other is done.
func mergeCancel(ctx, other context.Context) (context.Context, func()) {
	merged, cancel := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return merged, func() {
		stopAfter()
		cancel(context.Canceled)
	}
}

// AcquireAll acquires every locker in the order given, waiting for each as
// Acquire does, and returns one handle for the lot. On failure it releases
// what it took and returns the error. Always list lockers in the same order
// in every caller, or two callers can deadlock until their contexts end.
//
// The composite handle's context is done as soon as any lock's is; its
// fencing token is the first lock's; Release releases every lock in reverse
// order and joins the errors.
func AcquireAll(ctx context.Context, lockers ...Locker) (Handle, error) {
	if len(lockers) == 0 {
		return nil, Invalid("AcquireAll: no lockers")
	}
	hs := make([]Handle, 0, len(lockers))
	for _, l := range lockers {
		if l == nil {
			releaseAll(context.WithoutCancel(ctx), hs)
			return nil, Invalid("AcquireAll: nil locker")
		}
		h, err := l.Acquire(ctx)
		if err != nil {
			releaseAll(context.WithoutCancel(ctx), hs)
			return nil, err
		}
		hs = append(hs, h)
	}
	return newMultiHandle(hs), nil
}

func releaseAll(ctx context.Context, hs []Handle) error {
	var errs []error
	for i := len(hs) - 1; i >= 0; i-- {
		errs = append(errs, hs[i].Release(ctx))
	}
	return errors.Join(errs...)
}

// MultiHandle is the handle AcquireAll returns. Its Lease reports false:
// each of Handles reports its own lease.
type MultiHandle struct {
	*BaseHandle
	handles []Handle
	stops   []func() bool
}

func newMultiHandle(hs []Handle) *MultiHandle {
	m := &MultiHandle{handles: hs}
	m.BaseHandle = NewHandle(hs[0].FencingToken(), func(ctx context.Context) error {
		for _, stop := range m.stops {
			stop()
		}
		return releaseAll(ctx, hs)
	})
	for _, h := range hs {
		m.stops = append(m.stops, context.AfterFunc(h.Context(), func() {
			if cause := context.Cause(h.Context()); errors.Is(cause, ErrLockLost) {
				m.Lose(cause)
			} else {
				m.Lose(errors.New("a member lock was released"))
			}
		}))
	}
	return m
}

// Handles returns the member handles in acquisition order.
func (m *MultiHandle) Handles() []Handle { return m.handles }
