package kit

import (
	"context"
	"fmt"

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
