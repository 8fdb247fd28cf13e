package core

import "context"

// Holder describes who holds a lock.
type Holder struct {
	// ID is the identity the holder's Provider was configured with
	// (by default "hostname-pid" of the holder's process).
	ID string
	// Token is the holder's fencing token.
	Token uint64
}

// Inspector is implemented by Lockers that can tell who holds them, as
// election needs to show the current leader.
type Inspector interface {
	// Holder reports the current holder; held is false when the lock is
	// free. It is one round trip and takes no lock.
	Holder(ctx context.Context) (h Holder, held bool, err error)
}

// Verifier is implemented by Handles that can ask their backend's store
// whether their grant still holds: the strict check before a side effect
// that must not be made by a process that lost the lock, at the cost of a
// round trip. Held is the local check, which a lock taken away without the
// holder hearing of it yet (a session killed, a key deleted) still passes
// until the backend notices.
type Verifier interface {
	// Verify reports whether the store still holds this handle's grant.
	// held is false, without asking, once the handle is released or lost;
	// err matches ErrUnsupported when this backend (in this mode) cannot
	// ask, and is another error when the store could not be asked.
	Verify(ctx context.Context) (held bool, err error)
}
