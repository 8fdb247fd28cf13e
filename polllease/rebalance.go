package polllease

import (
	"log/slog"
	"slices"
	"time"
)

// handbackWindow: a target this instance released to rebalance and takes
// back, as its backup, within this many ticks was not taken by the
// instance it was handed to, which therefore is not polling it; the lease
// is then kept instead of handed over again.
const handbackWindow = backupGrace + 2

// handoff records a target released to rebalance: to whom, and when.
type handoff struct {
	to   string
	tick uint64
}

// pickReleases returns the leases of targets that left the set, and those
// to release to rebalance: held for MinHold, preferred elsewhere and not
// kept for a preferred instance that did not take them, oldest first, at
// most max(1, 10 % of owned) per tick so that rebalancing converges without
// flapping; c.mu is held.
func (c *Coordinator) pickReleases(now time.Time) (removed, rebalance []*lease) {
	var movable []*lease
	for t, l := range c.owned {
		switch {
		case !c.targets[t]:
			removed = append(removed, l)
		case c.assign[t] != c.id && c.assign[t] != l.keepFor && now.Sub(l.since) >= c.cfg.MinHold:
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
// or whose target is now preferred elsewhere; c.mu is held.
func (c *Coordinator) expireHandoffs(tick uint64) {
	for t, h := range c.handedTo {
		if c.assign[t] != h.to || tick > h.tick+handbackWindow {
			delete(c.handedTo, t)
		}
	}
}

// keepIfHandedBack marks target's new lease as kept despite preferred when
// this instance handed target to preferred within handbackWindow and has
// just taken it back; c.mu is held.
func (c *Coordinator) keepIfHandedBack(target, preferred string) {
	h, ok := c.handedTo[target]
	l := c.owned[target]
	if !ok || h.to != preferred || l == nil {
		return
	}
	l.keepFor = preferred
	c.log.Warn("Preferred instance did not take a target it was handed: keeping it",
		slog.String("target", target), slog.String("preferred", preferred))
}
