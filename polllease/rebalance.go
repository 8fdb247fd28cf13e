package polllease

import (
	"log/slog"
	"slices"
	"time"
)

// handbackWindow: a target this instance released to rebalance and takes
// back, as its backup, within this many ticks was not taken by the
// instance it was handed to, which therefore is not polling it; the lease
// is then kept for a doubling hold before it is handed over again (see
// keepIfHandedBack).
const handbackWindow = backupGrace + 2

// maxKeepDoublings caps the hold of a target taken back from its preferred
// instance: MinHold × 2^n after the n-th consecutive take-back, at most
// MinHold × 2^maxKeepDoublings (16 min with the default MinHold).
const maxKeepDoublings = 5

// handoff records a target released to rebalance: to whom, and when.
type handoff struct {
	to   string
	tick uint64
}

// handback counts the consecutive times this instance took a target back
// from the preferred instance it had handed it to.
type handback struct {
	to string
	n  int
}

// pickReleases returns the leases of targets that left the set, and those
// to release to rebalance: held for MinHold, preferred elsewhere and not
// kept from a preferred instance that did not take them (see
// keepIfHandedBack), oldest first, at most max(1, 10 % of owned) per tick so
// that rebalancing converges without flapping; c.mu is held.
func (c *Coordinator) pickReleases(now time.Time) (removed, rebalance []*lease) {
	var movable []*lease
	for t, l := range c.owned {
		switch {
		case !c.targets[t]:
			removed = append(removed, l)
		case c.assign[t] != c.id && now.Sub(l.since) >= c.cfg.MinHold && !l.keptFrom(c.assign[t], now):
			movable = append(movable, l)
		}
	}
	if len(movable) > 0 {
		slices.SortFunc(movable, func(a, b *lease) int { return a.since.Compare(b.since) })
		rebalance = movable[:min(len(movable), max(1, len(c.owned)/10))]
	}
	return removed, rebalance
}

// handOff records that target was released at tick to its preferred
// instance; c.mu is held. The preferred instance gets its grace from now:
// as the target's backup, this instance takes it back only if the
// preferred one does not take it within backupGrace ticks.
func (c *Coordinator) handOff(target string, tick uint64) {
	to := c.assign[target]
	c.handedTo[target] = handoff{to: to, tick: tick}
	c.probes[target] = &probe{preferred: to, since: tick, next: tick}
}

// expireHandoffs forgets the handoffs older than handbackWindow at tick,
// which this instance did not take back, so their count of take-backs
// starts again, and those whose target is now preferred elsewhere or left
// the set; c.mu is held.
func (c *Coordinator) expireHandoffs(tick uint64) {
	for t, h := range c.handedTo {
		switch {
		case c.assign[t] != h.to:
			delete(c.handedTo, t)
		case tick > h.tick+handbackWindow:
			delete(c.handedTo, t)
			delete(c.handbacks, t)
		}
	}
	for t, b := range c.handbacks {
		if c.assign[t] != b.to {
			delete(c.handbacks, t)
		}
	}
}

// keepIfHandedBack keeps target's new lease from preferred when this
// instance handed target to preferred within handbackWindow and has just
// taken it back: preferred is live (it heartbeats) but did not take it, so
// handing it over again at once would leave it unpolled again. The lease
// is offered to preferred again after MinHold × 2^n, n being the number of
// consecutive take-backs (at most maxKeepDoublings doublings): a preferred
// instance that was only slow (a loaded machine, heartbeats failing for a
// while) gets its target within a few holds, and one that never takes it
// leaves it unpolled for a few ticks per doubled hold. c.mu is held.
func (c *Coordinator) keepIfHandedBack(target, preferred string) {
	h, ok := c.handedTo[target]
	l := c.owned[target]
	if !ok || h.to != preferred || l == nil {
		return
	}
	delete(c.handedTo, target) // taken back: not a handoff that went through
	b := c.handbacks[target]
	if b.to != preferred {
		b = handback{to: preferred}
	}
	b.n++
	c.handbacks[target] = b
	hold := c.cfg.MinHold << min(b.n, maxKeepDoublings)
	l.keepFor, l.keepUntil = preferred, l.since.Add(hold)
	c.log.Warn("Preferred instance did not take a target it was handed: keeping it",
		slog.String("target", target), slog.String("preferred", preferred),
		slog.Int("times", b.n), slog.Duration("for", hold))
}

// keptFrom reports whether l is kept from preferred at now.
func (l *lease) keptFrom(preferred string, now time.Time) bool {
	return l.keepFor == preferred && now.Before(l.keepUntil)
}
