// Package core is the contract every distlock backend implements and every
// user of a lock codes against.
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
// The package core/locktest checks all of this against any Provider, and
// core/memlock is a Provider in memory, for the tests of code written
// against this package.
//
// # Optional interfaces
//
// A backend that can track live instances implements [Membership] (and
// [Heartbeater] when it can register and list in one round trip; [Heartbeat]
// uses it when present); polllease needs it. A Locker that can say who holds
// it implements [Inspector]; election uses it to name the leader. A Handle
// that can ask its store whether its grant still holds implements
// [Verifier]; polllease's IsOwnedStrict uses it, else Inspector.
//
// # Observing
//
// Every backend takes an [Observer] (its WithObserver option) and reports
// the same [Event] values to it from the machinery all backends share:
// each acquire with its outcome and wait, each release, each loss with its
// cause, each lease renewal with its round trip. The modules
// observe/prometheus and observe/otel turn them into metrics and traces.
//
// The machinery backends share (handles, lease keeping, waiting, local
// handoff) is in core/kit, for backend authors. core depends on the
// standard library only.
package core
