package polllease

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
)

// probe paces the acquire attempts of a target this instance does not hold.
type probe struct {
	preferred string // the preferred owner when the probe state began
	since     uint64 // the tick it began
	next      uint64 // the first tick at which to try again
	// unowned is the tick since which no announcement names a holder of
	// the target (0 while one does, or without announcements), and
	// rescued that its backup tried it once in that spell.
	unowned uint64
	rescued bool
}

// Pacing of the attempts on targets this instance does not hold. A target
// it is preferred for is tried every tick: its holder releases it at some
// tick, and each tick of delay leaves it unpolled that much longer. A target
// it only backs up is tried once its preferred instance has had backupGrace
// ticks to take it, then, while held by someone, only as a safety net (its
// holder may release it to a preferred instance that never takes it): every
// recheckTicks to 2×recheckTicks ticks, recheckTicks being the larger of
// maxBackupBackoff and recheckPerBackup × the targets the instance backs up,
// so that these checks cost an instance at most about one round trip per
// recheckPerBackup ticks however large the fleet. A change of the live
// members starts every target's pacing afresh, since a holder may be gone.
const (
	backupGrace      = 2
	maxBackupBackoff = 128
	recheckPerBackup = 32
)

// tickPlan is what one reconcile tick does after its assignment: the
// leases it releases (already detached) and the targets it tries.
type tickPlan struct {
	tick      uint64
	removed   []*lease // targets that left the set
	rebalance []*lease // targets another instance is preferred for
	acquire   []string
	backups   int // targets this instance backs up
}

// plan records the tick's assignment and decides its releases and
// attempts; the leases to release are detached before it returns.
func (c *Coordinator) plan(targets map[string]bool, members []string, owners, assign map[string]string) tickPlan {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	p := tickPlan{tick: c.tick}
	if !slices.Equal(members, c.members) {
		clear(c.probes)
	}
	prev := c.assign
	c.targets, c.members, c.assign = targets, members, assign
	c.settleHandoffs(p.tick, owners, prev, now)
	p.removed, p.rebalance = c.pickReleases(now)
	p.acquire, p.backups = c.pickAttempts(p.tick, owners)
	for t := range c.probes {
		if !targets[t] {
			delete(c.probes, t)
		}
	}
	for _, l := range p.removed {
		c.detach(l)
	}
	for _, l := range p.rebalance {
		c.detach(l)
		c.handOff(l.target, p.tick)
	}
	return p
}

// pickAttempts returns the targets of the current assignment this
// instance does not hold and tries at tick, paced by their probes, and how
// many targets it backs up; owners are the holders the announcements name
// (nil without announcements). c.mu is held.
func (c *Coordinator) pickAttempts(tick uint64, owners map[string]string) (acquire []string, backups int) {
	for t, pref := range c.assign {
		isBackup := pref != c.id && backup(t, pref, c.members) == c.id
		if isBackup {
			backups++
		}
		if c.owned[t] != nil {
			delete(c.probes, t)
			continue
		}
		p := c.probes[t]
		if p == nil || p.preferred != pref {
			p = &probe{preferred: pref, since: tick, next: tick}
			c.probes[t] = p
		}
		switch {
		case owners == nil || owners[t] != "":
			p.unowned, p.rescued = 0, false
		case p.unowned == 0:
			p.unowned = tick
		}
		switch {
		case isBackup && p.unowned != 0 && !p.rescued && tick >= p.unowned+backupGrace:
			// Nobody has announced it for backupGrace ticks: its
			// assignee is not taking it, whatever the pacing says
			// (a holder released it to an instance that does not
			// poll). Once a spell: a holder that announces nothing
			// (an older version) is left to the pacing.
			p.rescued = true
			acquire = append(acquire, t)
		case tick < p.next:
		case pref == c.id:
			acquire = append(acquire, t)
		case tick >= p.since+backupGrace && isBackup:
			// The preferred owner has had a tick or two to take it;
			// make sure it is not left unpolled.
			acquire = append(acquire, t)
		}
	}
	return acquire, backups
}

func (c *Coordinator) canAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running && c.beatOK && !c.fenced
}

// acquireAll tries the targets' leases, MaxParallel at a time, starting no
// attempt after until; the targets left are tried on the next tick. A
// target it backs up and finds held is tried again in recheck to
// 2×recheck ticks.
func (c *Coordinator) acquireAll(ctx context.Context, tick, recheck uint64, until time.Time, targets []string) {
	slices.Sort(targets)
	sem := make(chan struct{}, max(1, c.cfg.MaxParallel))
	var wg sync.WaitGroup
	for _, t := range targets {
		if ctx.Err() != nil || !c.canAcquire() || time.Now().After(until) {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Not cut short by ctx: a grant that arrives after Run ends is
			// released by acquire, where a cancelled call could leave it
			// held on the store, unknown to anyone, for a lease TTL.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.attemptTimeout())
			err := c.acquire(actx, t)
			cancel()
			if ctx.Err() != nil {
				return // stopping
			}
			c.attempted(t, tick, recheck, err)
		}()
	}
	wg.Wait()
}

// attempted paces the next attempt at target after one made at tick that
// ended with err.
func (c *Coordinator) attempted(target string, tick, recheck uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.probes[target]
	if err == nil && p != nil && p.preferred != c.id {
		c.tookBack(target, p.preferred, time.Now())
	}
	if err == nil || p == nil {
		delete(c.probes, target)
		return
	}
	if p.preferred != c.id {
		// Held by someone, so polled: look again only rarely, in
		// case its holder lets it go while the preferred owner
		// does not take it. A change of the preferred owner or
		// of the members resets this.
		p.next = tick + recheck + rand.Uint64N(recheck)
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		c.log.Warn("Lease acquire failed", slog.String("target", target), slog.Any("error", err))
	}
}
