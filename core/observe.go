package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Observer receives what happens to the locks of a Provider: every
// backend takes one with its WithObserver option, and reports through it
// the same events from the machinery all backends share. Adapters
// (observe/prometheus, observe/otel) turn the events into metrics and
// traces. It is declared here rather than in core/kit so that adapters
// and applications depend on the user contract alone.
//
// Observe is called synchronously on the goroutine where the event
// happens: the caller of Acquire, TryAcquire or Release, with the context
// of that call (so that a tracer can make the event a child of the
// caller's span), or the backend's own goroutine for renewals and losses,
// with a background context. Calls may be concurrent. It must return
// quickly and must not acquire or release locks of the Provider that
// reports to it.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event. An Acquire call reports EventWait when it starts and
// EventAcquire when it returns; TryAcquire reports EventAcquire alone.
// Every grant then ends with exactly one EventRelease or EventLost, so
// grants minus ends is the number of locks held.
const (
	EventWait    EventKind = iota + 1 // an Acquire starts: one more waiter until its EventAcquire
	EventAcquire                      // Acquire or TryAcquire returned: granted when Err is nil
	EventRelease                      // Release ended a grant that was still held
	EventLost                         // a grant's context ended with ErrLockLost; Err is the cause
	EventRenew                        // a lease renewal (a periodic check where leases do not expire) ended
)

// Event is one thing that happened to one lock.
type Event struct {
	Kind EventKind
	// Backend is the backend's name, as in Error.Backend: "file",
	// "redis", "redlock", "postgres", "nats".
	Backend string
	// Primitive is "mutex", "rwmutex" (the write side), "rwmutex.read"
	// or "semaphore".
	Primitive string
	// Name is the lock's name.
	Name string
	// Token is the grant's fencing token, 0 where there is no grant.
	Token uint64
	// Try marks the EventAcquire of a TryAcquire, which never waits.
	Try bool
	// Handoff, on the EventAcquire of a grant that a release handed
	// straight to this acquire, says where: "local" (a release of the
	// same Provider) or "server" (a release on the server named this
	// waiter the next holder). Empty when the acquire took the lock by
	// an attempt of its own.
	Handoff string
	// Duration is how long the call took (EventAcquire, EventRelease)
	// or the renewal's round trip (EventRenew).
	Duration time.Duration
	// Held is how long the grant was held, from the return of its
	// acquire (EventRelease, EventLost).
	Held time.Duration
	// Err is why an acquire failed (matching ErrNotAcquired when the lock
	// was busy or the context ended), a release's error, the cause of a
	// loss (matching ErrLockLost), or a renewal's error.
	Err error
}

// Outcome names the event's result in one word, the value metrics label
// it with:
//
//   - EventAcquire: "acquired", "busy" (held elsewhere), "cancelled" (the
//     context ended first) or "error";
//   - EventRelease: "released" or "error";
//   - EventLost: "lost";
//   - EventRenew: "renewed", "lost" (the backend says the lease is gone)
//     or "error" (outcome unknown: retried until the trust window closes);
//   - EventWait: "waiting".
func (e Event) Outcome() string {
	switch e.Kind {
	case EventWait:
		return "waiting"
	case EventLost:
		return "lost"
	case EventAcquire:
		switch {
		case e.Err == nil:
			return "acquired"
		case errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded):
			return "cancelled"
		case errors.Is(e.Err, ErrNotAcquired):
			return "busy"
		}
	case EventRelease:
		if e.Err == nil {
			return "released"
		}
	case EventRenew:
		switch {
		case e.Err == nil:
			return "renewed"
		case errors.Is(e.Err, ErrLockLost):
			return "lost"
		}
	}
	return "error"
}

func (k EventKind) String() string {
	switch k {
	case EventWait:
		return "wait"
	case EventAcquire:
		return "acquire"
	case EventRelease:
		return "release"
	case EventLost:
		return "lost"
	case EventRenew:
		return "renew"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}
