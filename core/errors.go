package core

import (
	"context"
	"fmt"
)

// Error is the error type backends return. It names the backend, the
// operation and the lock, and wraps the cause, so errors.Is matches both the
// core sentinel and the driver's or the context's error.
type Error struct {
	Backend string // "file", "redis", "postgres", ...
	Op      string // "acquire", "release", ...
	Name    string // the lock's name
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("distlock/%s: %s %q: %v", e.Backend, e.Op, e.Name, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// NotAcquired returns an error matching ErrNotAcquired and, when ctx is done,
// ctx.Err() as well. It is what a wait that gave up returns.
func NotAcquired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	return ErrNotAcquired
}

// Busy returns an error matching ErrNotAcquired that says who or what holds
// the lock, for TryAcquire on a held lock.
func Busy(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotAcquired, fmt.Sprintf(format, args...))
}

// Invalid returns an error matching ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// FailedLocker returns a Locker whose every acquire fails with err. Providers
// use it to report a bad name or argument from the acquire call, as the
// Provider interface promises, instead of panicking in the constructor.
func FailedLocker(name string, err error) Locker {
	return failedLocker{name: name, err: err}
}

// FailedRWLocker is FailedLocker for reader-writer locks; both sides fail.
func FailedRWLocker(name string, err error) RWLocker {
	return failedLocker{name: name, err: err}
}

type failedLocker struct {
	name string
	err  error
}

func (l failedLocker) Name() string                               { return l.name }
func (l failedLocker) TryAcquire(context.Context) (Handle, error) { return nil, l.err }
func (l failedLocker) Acquire(context.Context) (Handle, error)    { return nil, l.err }
func (l failedLocker) RLocker() Locker                            { return l }
