package core

import "fmt"

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
