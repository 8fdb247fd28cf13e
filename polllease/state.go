package polllease

import "time"

// Ownership is what this instance can do with a target now.
type Ownership int

const (
	// NotOwned: this instance holds no lease on the target.
	NotOwned Ownership = iota
	// Owned: this instance holds the lease and polls the target (IsOwned
	// is true).
	Owned
	// Uncertain: this instance holds the lease but its poller is paused,
	// because a renewal of the lease failed, a trust window (the lease's
	// or the heartbeat's) has closed by the clock, or the lease has just
	// ended and is about to be reported lost. The store may count the
	// lease as another's by now.
	Uncertain
)

func (o Ownership) String() string {
	switch o {
	case Owned:
		return "owned"
	case Uncertain:
		return "uncertain"
	}
	return "not owned"
}

// TargetState is this instance's standing on one target.
type TargetState struct {
	State Ownership
	// Since is when State began: the acquire or the last resume for
	// Owned, the pause (EventUncertain) for Uncertain, or the moment the
	// trust window closed when the pause is not reported yet; for NotOwned,
	// when this instance last let the lease go (it stopped the poller to
	// release the lease, or found the lease lost), zero
	// when it has not held it since the target last joined the set (a
	// target that leaves the set is forgotten at the next tick).
	Since time.Time
	// Token is the fencing token of the lease this instance holds, or,
	// for NotOwned, of the last one it held (0 if none).
	Token uint64
}

// unowned is a target this instance held and let go.
type unowned struct {
	since time.Time
	token uint64
}

// State returns this instance's standing on target: Owned, Uncertain or
// NotOwned, since when, and with which token. It is local and cheap, and
// agrees with IsOwned (Owned exactly when IsOwned is true) and with the
// events (Owned from EventAcquired or EventResumed, Uncertain from
// EventUncertain, NotOwned from EventReleased or EventLost).
func (c *Coordinator) State(target string) TargetState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state(target, c.now())
}

// state is State at now; c.mu is held.
func (c *Coordinator) state(target string, now time.Time) TargetState {
	l := c.owned[target]
	if l == nil {
		u := c.unowned[target]
		return TargetState{State: NotOwned, Since: u.since, Token: u.token}
	}
	switch {
	case c.mayPoll(l, now):
		return TargetState{State: Owned, Since: l.polling, Token: l.token}
	case !l.paused.IsZero():
		return TargetState{State: Uncertain, Since: l.paused, Token: l.token}
	}
	return TargetState{State: Uncertain, Since: c.closedAt(l, now), Token: l.token}
}

// closedAt returns when l stopped being pollable, for a lease whose pause
// is not reported yet: the end of the trust window that closed (the
// heartbeat's or the lease's), or now when its handle has just ended; c.mu
// is held.
func (c *Coordinator) closedAt(l *lease, now time.Time) time.Time {
	at := now
	if d := c.beatDeadline(); !now.Before(d) {
		at = d
	}
	if st, expired := leaseExpired(l.h, now); expired && st.Deadline.Before(at) {
		at = st.Deadline
	}
	return at
}

// forgetRemoved drops the records of targets that left the set; c.mu is
// held.
func (c *Coordinator) forgetRemoved() {
	for t := range c.unowned {
		if !c.targets[t] {
			delete(c.unowned, t)
		}
	}
}
