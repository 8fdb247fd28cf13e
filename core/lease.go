package core

import "time"

// LeaseState is what a handle's lease keeper last learned about the lease:
// when the backend last confirmed it, until when it is trusted, and whether
// the latest renewal failed.
type LeaseState struct {
	// Renewed is the start of the last successful renewal, or of the
	// acquire when no renewal has succeeded yet: the backend held the lease
	// for this handle at that moment.
	Renewed time.Time
	// Deadline is the end of the trust window, Renewed + TTL − margin: the
	// handle is lost at this moment unless a renewal succeeds first. It is
	// zero when the backend's leases do not expire on their own.
	Deadline time.Time
	// Renewals counts the successful renewals since the acquire.
	Renewals uint64
	// Err is the error of the last renewal when it failed with an unknown
	// outcome (a timeout, a refused connection): the lease is uncertain,
	// since another holder cannot have it before Deadline but this one may
	// not keep it past then. Nil once a renewal succeeds. A renewal that
	// finds the lease gone or taken does not set Err: it ends the handle's
	// context with ErrLockLost.
	Err error
}

// LeaseReporter is implemented by handles that can tell the state of the
// lease behind them as it changes, so that a holder can react to a failed
// renewal (pause work that is not safe to repeat, say) while the lease is
// still within its trust window, before the context ends. Every handle
// built on kit.BaseHandle implements it; Lease reports false for those whose
// backend renews nothing (a connection-bound lock, say).
type LeaseReporter interface {
	// Lease returns the current state of the lease, and false when no
	// Keeper keeps it.
	Lease() (LeaseState, bool)
	// LeaseChanged returns a channel that is closed at the next change of
	// the state Lease returns, and when the handle's context ends. Call it
	// before Lease, so that no change between the two calls goes unseen.
	LeaseChanged() <-chan struct{}
}

// Expired reports whether the trust window has closed at now: the lease
// may have passed to another holder, whatever the handle's context says
// yet. A zero Deadline (a backend whose leases do not expire on their own)
// never expires.
func (s LeaseState) Expired(now time.Time) bool {
	return !s.Deadline.IsZero() && !now.Before(s.Deadline)
}

// Held reports whether h's lock is still held as far as this process can
// tell at this instant: HeldAt(h, time.Now()).
func Held(h Handle) bool { return HeldAt(h, time.Now()) }

// HeldAt reports whether h's lock is still held at now, as far as this
// process can tell: its context is live and, when a lease backs it, the
// lease's trust window has not closed at now. It reads no timer, so it
// turns false the moment the window closes, even when the timer that would
// end the context has not fired yet (right after a GC pause, a VM freeze or
// SIGSTOP). The handles of distlock's backends check the same window in
// their context's Err and Done, so for them it agrees with
// h.Context().Err() == nil; HeldAt also covers handles whose context does
// not. A nil h is not held.
//
// Make it the last check before a side effect. It cannot see a pause
// between the check and the effect: pass h.FencingToken() to the resource
// too, so that it refuses a stale holder.
func HeldAt(h Handle, now time.Time) bool {
	if h == nil || h.Context().Err() != nil {
		return false
	}
	if r, ok := h.(LeaseReporter); ok {
		if s, kept := r.Lease(); kept && s.Expired(now) {
			return false
		}
	}
	return true
}
