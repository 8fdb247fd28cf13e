// Package kit is the machinery distlock backends share. It is for backend
// authors; code that only takes and holds locks needs package core alone.
//
// A backend implements core.Provider. Its pieces come from here:
//
//   - [BaseHandle] is the handle: it owns the handle's context and its
//     cause, makes Release idempotent, keeps the fencing token and reports
//     the lease's state ([core.LeaseReporter]). Make one with [NewHandle]
//     once the lock is granted; call Lose when the backend sees the lock
//     slip away.
//   - [Keeper] renews leases in batches on a cadence and declares a lease
//     lost when its trust window (last renewal + TTL − margin) closes, even
//     when the backend call hangs.
//   - [Wait] runs an acquire loop: one attempt, then a randomized bounded
//     [Backoff] that a [Notifier] signal (a release seen on the backend)
//     cuts short.
//   - [Handoffs] lines up the waiting acquires of one process per lock,
//     so that only the first contends on the backend, and lets a release
//     hand the lock straight to that waiter (Pass) within bounded runs
//     ([HandoffLimits], the same defaults on every backend); [Gates] is the
//     same line without handoffs.
//   - [Probe] makes a Provider's Lockers report to its logger and its
//     core.Observers (each backend's WithLogger and WithObserver): the
//     acquires they make; the release and loss of the handles built on
//     BaseHandle; the Keeper's renewals; the handoffs Handoffs makes (and
//     [BaseHandle.HandedByServer] marks). A Provider with neither has a
//     nil Probe, which costs nothing.
//   - [ValidateName] rejects what no backend can lock (the empty name,
//     invalid UTF-8), and [ValidateMember] a Membership call's group and
//     member id; [SafeName] encodes any name into a short string safe for
//     file names and keys.
//   - [ParseURL] takes a lock URL apart for a backend's Open: scheme, user,
//     one or more hosts, path, and query parameters read once each, with
//     errors that name the part at fault and never show the password.
//   - [Busy], [NotAcquired] and [Invalid] build errors that match the core
//     sentinels; [FailedLocker] reports a bad name or argument from the
//     first acquire call, as core.Provider promises.
//
// A backend proves itself with core/locktest: run locktest.TestProvider against a
// Provider factory in the backend's tests (see ARCHITECTURE.md at the
// repository root for the path of one Acquire and one Release).
//
// kit depends on the standard library and core only.
package kit
