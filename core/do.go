package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
		return nil, fmt.Errorf("%w: AcquireAll: no lockers", ErrInvalidArgument)
	}
	hs := make([]Handle, 0, len(lockers))
	for _, l := range lockers {
		if l == nil {
			releaseAll(context.WithoutCancel(ctx), hs)
			return nil, fmt.Errorf("%w: AcquireAll: nil locker", ErrInvalidArgument)
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

// multiHandle is the handle AcquireAll returns: its context ends when any
// member's does, and Release stops watching the members, then releases them
// in reverse order. Handles returns the members in acquisition order.
type multiHandle struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	handles []Handle
	stops   []func() bool
	once    sync.Once
}

func newMultiHandle(hs []Handle) *multiHandle {
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &multiHandle{ctx: ctx, cancel: cancel, handles: hs}
	for _, h := range hs {
		m.stops = append(m.stops, context.AfterFunc(h.Context(), func() {
			if cause := context.Cause(h.Context()); errors.Is(cause, ErrLockLost) {
				cancel(cause)
			} else {
				cancel(fmt.Errorf("%w: a member lock was released", ErrLockLost))
			}
		}))
	}
	return m
}

func (m *multiHandle) Context() context.Context { return m.ctx }

// FencingToken is the first member's token.
func (m *multiHandle) FencingToken() uint64 { return m.handles[0].FencingToken() }

// Release is idempotent: only the first call releases the members and
// returns their joined errors.
func (m *multiHandle) Release(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		m.cancel(ErrReleased)
		for _, stop := range m.stops {
			stop()
		}
		err = releaseAll(ctx, m.handles)
	})
	return err
}

func (m *multiHandle) Handles() []Handle { return m.handles }
