// Package memlock is an in-memory distlock backend, for tests: a Provider
// whose locks live in a Store in this process, with every primitive and
// optional interface of the real backends and a way to make a held lock
// lost on demand.
//
//	locks, _ := memlock.New()
//	defer locks.Close()
//	h, err := locks.Mutex("reports").Acquire(ctx)
//	...
//	locks.Break("reports") // as an operator deleting the key: h.Context() ends with core.ErrLockLost
//
// Providers made with the same Store (WithStore) share their locks, as
// processes share a server: give each component of a test its own
// Provider on one Store to have them contend. Open("mem://NAME") does the
// same by name within the process.
//
// It passes the whole of core/locktest: mutexes, reader-writer locks with
// writer preference, semaphores, fencing tokens strictly increasing per
// name across every primitive (a counter per name in the Store), Holder
// (core.Inspector) on a mutex and the write side of a reader-writer lock,
// and core.Membership and core.Heartbeater (expiry by the system clock).
// Waiters wake on the release that frees them. There are no leases: a
// handle stays held until Release, Break, or the Close of its Provider,
// which frees every lock the Provider holds, as a dying process's
// connection would.
//
// It depends on the standard library, core and core/kit only, so tests of
// any code written against core can use it without a server.
package memlock
