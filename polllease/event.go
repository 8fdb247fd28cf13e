package polllease

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what happened to a lease or to the instance.
type EventKind int

const (
	// EventAcquired: this instance took the target's lease; its poller
	// starts.
	EventAcquired EventKind = iota + 1
	// EventReleased: this instance gave the lease up after its poller
	// stopped; Reason says why. A lease found lost when it is given up
	// (a rebalance or Run's return came before the loss was reported) is
	// reported EventLost instead.
	EventReleased
	// EventLost: the backend ended the lease (not renewed within its trust
	// window, or taken); the poller stopped at once. Err says why. The
	// target is acquired again on a later tick if it is still preferred.
	EventLost
	// EventUncertain: the poller is paused while the lease is kept,
	// because the store may no longer count it as this instance's. Either
	// the lease's renewal failed (Err is the renewal's error): the lease
	// is trusted until its trust window closes, but the store may not
	// have extended it; or the heartbeat has failed past its trust window
	// (HeartbeatTTL − margin after the start of the last one that
	// succeeded), so the store may already count this instance dead, and
	// no lease is acquired until a heartbeat succeeds again; or the check
	// before a poll found the lease's trust window closed by the clock
	// (Err matches core.ErrLockLost) before the keeper ended it. One event
	// per target that was polling; an EventResumed, EventLost or
	// EventReleased follows.
	EventUncertain
	// EventResumed: what paused the poller is over (a renewal of the lease
	// succeeded, a heartbeat succeeded) and the lease is still held, so its
	// poller runs again.
	EventResumed
	// EventRenewed: the backend renewed the lease; one event per
	// successful renewal, after the renewal (on backends whose handles
	// report their lease, core.LeaseReporter: redislock, redlock,
	// natslock, filelock). Logged at Config.RoutineLevel (Debug by
	// default).
	EventRenewed
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventReleased:
		return "released"
	case EventLost:
		return "lost"
	case EventUncertain:
		return "uncertain"
	case EventResumed:
		return "resumed"
	case EventRenewed:
		return "renewed"
	}
	return "unknown"
}

// Reason says why a lease was released.
type Reason string

const (
	ReasonRebalance Reason = "rebalance"      // another instance is preferred for the target
	ReasonStop      Reason = "stop"           // the Coordinator stopped
	ReasonRemoved   Reason = "target removed" // the target left the targets set
	ReasonManual    Reason = "manual"         // Coordinator.Release was called
)

// Event describes one change of a lease this instance holds (or held).
type Event struct {
	Kind     EventKind
	Instance string // this instance's ID
	Target   string
	Token    uint64 // the lease's fencing token
	Reason   Reason // for EventReleased
	Err      error  // for EventLost and EventUncertain (why), and EventReleased (a failed release)
	Time     time.Time
}

// LogValue renders the event with the fields the Coordinator logs.
func (e Event) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("kind", e.Kind.String()),
		slog.String("instance", e.Instance),
		slog.String("target", e.Target),
		slog.Uint64("token", e.Token),
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(e.Reason)))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// event returns the event of kind for l. For the events that start or
// pause l's poller it also records when, so that State agrees with the
// events; those are made with c.mu held.
func (c *Coordinator) event(kind EventKind, l *lease, reason Reason, err error) Event {
	e := Event{Kind: kind, Instance: c.id, Target: l.target, Token: l.token, Reason: reason, Err: err, Time: time.Now()}
	switch kind {
	case EventAcquired, EventResumed:
		l.polling, l.paused = e.Time, time.Time{}
	case EventUncertain:
		l.paused = e.Time
	}
	return e
}

// emit logs the events and hands them to OnEvent, in order.
func (c *Coordinator) emit(events ...Event) {
	if len(events) == 0 {
		return
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.deliver(events)
}

// deliver is emit with c.emitMu held.
func (c *Coordinator) deliver(events []Event) {
	ctx := context.Background()
	for _, e := range events {
		c.logEvent(ctx, e)
		if c.cfg.OnEvent != nil {
			c.cfg.OnEvent(e)
		}
	}
}
