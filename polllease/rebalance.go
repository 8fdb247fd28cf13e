package polllease

import (
	"log/slog"
	"slices"
	"time"
)

// handbackWindow: a target this instance released to rebalance and sees
// taken by another instance than the one it was handed to (or takes back
// itself, as its backup) within this many ticks was not taken by that
// instance, which therefore is not taking what it is handed; this instance
// then holds its releases to it off (see heldOff).
const handbackWindow = backupGrace + 4

// maxKeepDoublings caps the hold-off of an instance that did not take what
// it was handed: MinHold × 2^n after the n-th consecutive time, at most
// MinHold × 2^maxKeepDoublings (16 min with the default MinHold).
const maxKeepDoublings = 5

// handoff records a target released to rebalance: to whom, and when.
type handoff struct {
	to   string
	tick uint64
}

// handback counts the consecutive times an instance did not take a target
// this instance handed it, and until when no target is released to it.
type handback struct {
	n     int
	until time.Time
}

// pickReleases returns the leases of targets that left the set, and those
// to release to rebalance: held for MinHold, assigned elsewhere to an
// instance not held off (see heldOff), oldest first, at most max(1, 10 %
// of owned) per tick so that rebalancing converges without flapping; c.mu
// is held.
func (c *Coordinator) pickReleases(now time.Time) (removed, rebalance []*lease) {
	var movable []*lease
	for t, l := range c.owned {
		switch {
		case !c.targets[t]:
			removed = append(removed, l)
		case c.assign[t] != c.id && now.Sub(l.since) >= c.cfg.MinHold && !c.heldOff(c.assign[t], now):
			movable = append(movable, l)
		}
	}
	if len(movable) > 0 {
		slices.SortFunc(movable, func(a, b *lease) int { return a.since.Compare(b.since) })
		rebalance = movable[:min(len(movable), max(1, len(c.owned)/10))]
	}
	return removed, rebalance
}

// handOff records that target was released at tick to the instance it is
// assigned to; c.mu is held. That instance gets its grace from now: as the
// target's backup, this instance takes it back only if it is not taken
// within backupGrace ticks.
func (c *Coordinator) handOff(target string, tick uint64) {
	to := c.assign[target]
	c.handedTo[target] = handoff{to: to, tick: tick}
	c.probes[target] = &probe{preferred: to, since: tick, next: tick}
}

// settleHandoffs learns, at tick, what became of the targets released to
// rebalance, from owners (the holders the announcements name; nil where
// the Membership announces nothing) and prev, the assignment of the tick
// before: one its recipient holds went through, which ends the recipient's
// hold-off; one the recipient's backup holds, taken while it was still
// assigned to the recipient, was not taken by it, which holds the
// recipient off (a take-back by this instance is seen in attempted). A
// handoff whose target another instance holds or is now assigned
// elsewhere says nothing of its recipient; those and handoffs older than
// handbackWindow are forgotten. Hold-offs of instances that left are
// forgotten too. c.mu is held.
func (c *Coordinator) settleHandoffs(tick uint64, owners, prev map[string]string, now time.Time) {
	for t, h := range c.handedTo {
		o := owners[t]
		switch {
		case o == h.to:
			delete(c.handedTo, t)
			delete(c.handbacks, h.to)
		case o != "" && o != c.id && prev[t] == h.to && o == backup(t, h.to, c.members):
			delete(c.handedTo, t)
			c.holdOff(t, h.to, now)
		case o != "" || c.assign[t] != h.to || tick > h.tick+handbackWindow:
			delete(c.handedTo, t)
		}
	}
	for m := range c.handbacks {
		if !slices.Contains(c.members, m) {
			delete(c.handbacks, m)
		}
	}
}

// tookBack is called when this instance acquired target as the backup of
// preferred; c.mu is held. If it had handed target to preferred within
// handbackWindow, preferred did not take it: it is held off.
func (c *Coordinator) tookBack(target, preferred string, now time.Time) {
	if h, ok := c.handedTo[target]; ok && h.to == preferred {
		delete(c.handedTo, target)
		c.holdOff(target, preferred, now)
	}
}

// holdOff records that instance to did not take target, handed to it: no
// target is released to it for MinHold × 2^n, n being the number of
// consecutive times (at most maxKeepDoublings doublings). An instance
// that was only slow (a loaded machine, heartbeats failing for a while)
// gets its targets within a few holds; one that never takes them costs a
// few unpolled ticks per doubled hold. Several handoffs that fail together
// count once. c.mu is held.
func (c *Coordinator) holdOff(target, to string, now time.Time) {
	b := c.handbacks[to]
	if now.Before(b.until) {
		return
	}
	b.n++
	hold := c.cfg.MinHold << min(b.n, maxKeepDoublings)
	b.until = now.Add(hold)
	c.handbacks[to] = b
	c.log.Warn("Handoffs held off: an instance did not take a target it was handed",
		slog.String("target", target), slog.String("recipient", to),
		slog.Int("times", b.n), slog.Duration("for", hold))
}

// heldOff reports whether releases to instance are held off at now; c.mu
// is held.
func (c *Coordinator) heldOff(instance string, now time.Time) bool {
	return now.Before(c.handbacks[instance].until)
}
