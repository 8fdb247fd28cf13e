package kit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
)

// NotAcquired returns an error matching ErrNotAcquired and, when ctx is done,
// ctx.Err() as well. It is what a wait that gave up returns.
func NotAcquired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", core.ErrNotAcquired, err)
	}
	return core.ErrNotAcquired
}

// Busy returns an error matching ErrNotAcquired that says who or what holds
// the lock, for TryAcquire on a held lock.
func Busy(format string, args ...any) error {
	return fmt.Errorf("%w: %s", core.ErrNotAcquired, fmt.Sprintf(format, args...))
}

// Invalid returns an error matching ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", core.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// FailedLocker returns a Locker whose every acquire fails with err. Providers
// use it to report a bad name or argument from the acquire call, as the
// Provider interface promises, instead of panicking in the constructor.
func FailedLocker(name string, err error) core.Locker {
	return failedLocker{name: name, err: err}
}

// FailedRWLocker is FailedLocker for reader-writer locks; both sides fail.
func FailedRWLocker(name string, err error) core.RWLocker {
	return failedLocker{name: name, err: err}
}

type failedLocker struct {
	name string
	err  error
}

func (l failedLocker) Name() string                                    { return l.name }
func (l failedLocker) TryAcquire(context.Context) (core.Handle, error) { return nil, l.err }
func (l failedLocker) Acquire(context.Context) (core.Handle, error)    { return nil, l.err }
func (l failedLocker) RLocker() core.Locker                            { return l }

// Wrap returns err as a *core.Error naming the backend, the operation and
// the lock; nil stays nil, and an error that is a *core.Error already is
// returned as it is, so each failure is named once, where it is closest to
// the caller's request.
func Wrap(backend, op, name string, err error) error {
	if err == nil {
		return nil
	}
	var named *core.Error
	if errors.As(err, &named) {
		return err
	}
	return &core.Error{Backend: backend, Op: op, Name: name, Err: err}
}

// CleanupTimeout bounds the best-effort calls a backend makes on its own
// after the caller's request is over: giving back a grant whose acquire
// failed or was cancelled, releasing a handoff nobody took. Its context is
// detached from the caller's, so a cancelled caller still frees the lock.
const CleanupTimeout = 2 * time.Second
