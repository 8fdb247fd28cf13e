package core

import (
	"context"
	"errors"
)

// Locker is a named lock. The same name from any process, on the same
// backend, is the same lock.
type Locker interface {
	// Name returns the name the Locker was made with.
	Name() string
	// TryAcquire makes one attempt and does not wait. When the lock is held
	// elsewhere it returns an error matching ErrNotAcquired.
	TryAcquire(ctx context.Context) (Handle, error)
	// Acquire waits until the lock is granted or ctx is done; then the error
	// matches both ErrNotAcquired and ctx.Err().
	Acquire(ctx context.Context) (Handle, error)
}

// RWLocker is a reader-writer lock, shaped like sync.RWMutex: the Locker it
// embeds is the exclusive (write) side; RLocker is the shared (read) side.
type RWLocker interface {
	Locker
	// RLocker returns the shared side. Many read handles may be held at once;
	// a write handle excludes every other handle; a waiting writer keeps new
	// readers out (writer preference).
	RLocker() Locker
}

// Handle is proof that a lock is held.
type Handle interface {
	// Release gives the lock up. It is idempotent; after the first call it
	// returns nil. A release never touches a later holder's grant.
	Release(ctx context.Context) error
	// Context is done once the lock is no longer held. context.Cause is
	// ErrReleased after Release and wraps ErrLockLost when the backend saw
	// the lock slip away (lease not renewed in time, connection dropped, key
	// taken). Run the protected work under it.
	Context() context.Context
	// FencingToken is > 0 and strictly greater than every token granted
	// earlier for the same name on the same backend. Pass it to the resource
	// you protect so it can refuse writes from a holder that lost the lock.
	FencingToken() uint64
}

// Provider makes the primitives of one backend by name. Making a Locker does
// no I/O and never fails: a bad name or argument is reported by the first
// acquire call.
type Provider interface {
	Mutex(name string) Locker
	RWMutex(name string) RWLocker
	// Semaphore admits at most max holders at once. Every user of the name
	// must pass the same max.
	Semaphore(name string, max int) Locker
}

// Sentinel errors. Every error a backend returns matches at most one of
// these with errors.Is, and keeps the driver's error in its chain.
var (
	ErrNotAcquired     = errors.New("distlock: not acquired")      // busy (TryAcquire) or gave up waiting (Acquire)
	ErrLockLost        = errors.New("distlock: lock lost")         // cause of a handle's context when the lock slipped away
	ErrReleased        = errors.New("distlock: lock released")     // cause of a handle's context after Release
	ErrInvalidName     = errors.New("distlock: invalid lock name") // empty, or not representable on this backend
	ErrInvalidArgument = errors.New("distlock: invalid argument")  // bad TTL, semaphore max < 1, nil client, ...
	ErrUnsupported     = errors.New("distlock: unsupported")       // a backend that cannot offer a primitive says so
)
