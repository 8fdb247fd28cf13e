// Package core holds the contract every distlock backend implements and the
// machinery they share.
//
// A backend (filelock, redislock, redlock, pglock, natslock) is a [Provider]:
// it makes named [Locker] values for mutexes, reader-writer locks and
// semaphores. Acquiring one returns a [Handle], the proof that the lock is
// held. Every handle carries
//
//   - a fencing token, strictly greater than every token granted before it for
//     the same name on the same backend, so a protected resource can refuse a
//     write from a holder that has since lost the lock; and
//   - a context that is done as soon as the lock is no longer held: cancelled
//     with cause [ErrReleased] after Release, or with a cause wrapping
//     [ErrLockLost] when the backend saw the lock slip away.
//
// Run the protected work under the handle's context:
//
//	h, err := locker.Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())
//	return doWork(h.Context(), h.FencingToken())
//
// [Do] packages that pattern.
//
// # Semantics every backend meets
//
// Locks are not reentrant: a second acquire of a held name waits or fails like
// any other contender, even from the same Locker value. Names are
// case-sensitive and any non-empty valid UTF-8 string works on every backend;
// the empty string or invalid UTF-8 fails with [ErrInvalidName] before any
// I/O. Release is idempotent and never frees a later holder's grant. A context
// only bounds the wait: once granted, a handle ignores the context it was
// acquired with. A mutex, a reader-writer lock and a semaphore with the same
// name are distinct locks.
//
// The package core/locktest checks all of this against any Provider.
//
// # Shared machinery
//
// Backends build on [Wait] (randomized bounded backoff that wakes early on a
// [Notifier] signal), [Gates] (one local contender per lock, the others
// queued in arrival order), [Keeper] (renews leases in batches on a cadence
// and declares a lease lost when its trust window closes, even if the
// backend call hangs), [BaseHandle] (the context, the idempotent release,
// the fencing token, and the lease's renewals as a [LeaseReporter]) and
// [SafeName] (a portable encoding of any name into a short file-system and
// key-safe string).
//
// # Optional interfaces
//
// A backend that can track live instances implements [Membership] (and
// [Heartbeater] when it can register and list in one round trip; [Heartbeat]
// uses it when present); polllease needs it. A Locker that can say who holds
// it implements [Inspector]; election uses it to name the leader.
//
// core depends on the standard library only.
package core
