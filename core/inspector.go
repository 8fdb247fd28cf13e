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
