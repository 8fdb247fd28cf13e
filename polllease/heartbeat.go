package polllease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
)

// heartbeatLoop registers this instance whenever the reconcile ticks, which
// heartbeat too, have not attempted a heartbeat for HeartbeatInterval (a
// quarter of it while heartbeats fail): at start, and when the ticks are
// slower than the heartbeat, slow, or skipped.
func (c *Coordinator) heartbeatLoop(ctx context.Context, firstBeat chan<- struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		c.mu.Lock()
		wait := c.beatWait(c.now())
		c.mu.Unlock()
		if wait <= 0 {
			_, done, err := c.beat(ctx, false)
			if ctx.Err() != nil {
				return
			}
			if done && err == nil && first {
				first = false
				close(firstBeat)
			}
			c.mu.Lock()
			wait = c.beatWait(c.now())
			c.mu.Unlock()
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// beatWait returns how long the heartbeat loop waits before it beats, from
// now; c.mu is held. A reconcile tick that is due, or running, when the
// loop's beat falls due heartbeats too: the loop waits for it, up to
// beatSlack longer, rather than beat twice in a row.
func (c *Coordinator) beatWait(now time.Time) time.Duration {
	if c.lastAttempt.IsZero() {
		return 0
	}
	if c.beatFails > 0 {
		return c.lastAttempt.Add(max(c.cfg.HeartbeatInterval/4, time.Millisecond)).Sub(now)
	}
	due := c.lastAttempt.Add(c.cfg.HeartbeatInterval)
	if now.Before(due) {
		return due.Sub(now)
	}
	latest := due.Add(c.beatSlack())
	if !c.nextTick.IsZero() && !c.nextTick.After(latest) && now.Before(latest) {
		return latest.Sub(now)
	}
	return 0
}

// beatSlack is how much later than HeartbeatInterval the heartbeat loop
// lets a reconcile tick beat in its place: the tick's jitter, up to a
// quarter interval, but never so long that the trust window could close.
func (c *Coordinator) beatSlack() time.Duration {
	return min(c.cfg.HeartbeatInterval/4, (c.cfg.HeartbeatTTL-c.cfg.heartbeatMargin()-c.cfg.HeartbeatInterval)/2)
}

// beat heartbeats once. With list (the reconcile tick) it also returns the
// live members, through core.Heartbeat: one round trip on a backend that
// implements core.Heartbeater, Register then Members on the others. Without
// list (the heartbeat loop) it only registers, and does nothing, reporting
// done false, when a beat made while it waited for its turn made this one
// unnecessary. Where the Membership is a core.Announcer, every beat is an
// Announce of the targets held (see holdings.go), and the members come
// with their announcements. Beats are serialized, so their outcomes apply
// in the order they started; an outcome that arrives after ctx ended is
// not applied.
func (c *Coordinator) beat(ctx context.Context, list bool) (members []core.Member, done bool, err error) {
	c.beatMu.Lock()
	defer c.beatMu.Unlock()
	start := c.now()
	c.mu.Lock()
	if !list && c.beatWait(start) > 0 {
		c.mu.Unlock()
		return nil, false, nil
	}
	c.lastAttempt = start
	if list {
		c.nextTick = time.Time{} // this tick has beaten; the loop need not wait for it
	}
	c.mu.Unlock()

	bctx, cancel := context.WithTimeout(ctx, c.cfg.HeartbeatInterval)
	members, err = c.register(bctx, list)
	cancel()
	if ctx.Err() != nil {
		return nil, true, ctx.Err()
	}
	if err != nil {
		c.beatFailed(err)
		return nil, true, err
	}
	// A tick that recovers goes on with its own assignment; a recovery
	// in the heartbeat loop calls for a tick at once.
	c.beatSucceeded(start, !list)
	return members, true, nil
}

// register is beat's call to the Membership.
func (c *Coordinator) register(ctx context.Context, list bool) ([]core.Member, error) {
	m, group, ttl := c.cfg.Membership, c.cfg.Group, c.cfg.HeartbeatTTL
	if a := c.announcer; a != nil && !c.announceOff.Load() {
		members, err := c.announce(ctx, a)
		if !errors.Is(err, core.ErrUnsupported) {
			return members, err
		}
		// Nothing was registered: heartbeat without a value instead.
		if c.announceOff.CompareAndSwap(false, true) {
			c.log.Warn("Announce unsupported: assigning without holdings", slog.Any("error", err))
		}
	}
	if !list {
		return nil, m.Register(ctx, group, c.id, ttl)
	}
	ids, err := core.Heartbeat(ctx, m, group, c.id, ttl)
	members := make([]core.Member, len(ids))
	for i, id := range ids {
		members[i] = core.Member{ID: id}
	}
	return members, err
}

// announce is register's Announce of the targets held.
func (c *Coordinator) announce(ctx context.Context, a core.Announcer) ([]core.Member, error) {
	group, ttl := c.cfg.Group, c.cfg.HeartbeatTTL
	c.mu.Lock()
	held := c.holdings()
	c.mu.Unlock()
	if len(held) > maxHoldings && c.overAnnounced.CompareAndSwap(false, true) {
		c.log.Warn("Holding more targets than one announcement names: the others see only some of them",
			slog.Int("held", len(held)), slog.Int("announced", maxHoldings))
	}
	return a.Announce(ctx, group, c.id, ttl, encodeHoldings(held))
}

// holdings returns the targets this instance holds with their fencing
// tokens; c.mu is held.
func (c *Coordinator) holdings() map[string]uint64 {
	held := make(map[string]uint64, len(c.owned))
	for t, l := range c.owned {
		held[t] = l.token
	}
	return held
}

func (c *Coordinator) beatFailed(err error) {
	c.mu.Lock()
	c.beatOK = false
	c.beatFails++
	first := c.beatFails == 1
	c.mu.Unlock()
	if first {
		c.log.Warn("Heartbeat failed: no acquisitions until it succeeds", slog.Any("error", err))
	} else {
		c.log.Debug("Heartbeat failed", slog.Any("error", err))
	}
}

// beatSucceeded records a successful heartbeat that started at start: it
// reopens the trust window and, if it had closed, resumes the pollers.
func (c *Coordinator) beatSucceeded(start time.Time, kickTick bool) {
	c.mu.Lock()
	recovered := !c.beatOK && !c.lastBeat.IsZero()
	c.beatOK = true
	c.beatFails = 0
	c.lastBeat = start
	if c.running {
		c.fence.Reset(c.beatDeadline().Sub(c.now()))
	}
	var paused []pausedPoller
	if c.fenced {
		c.fenced = false
		for _, l := range c.owned {
			// A lease whose renewal failed stays paused until a
			// renewal succeeds.
			if !l.uncertain {
				paused = append(paused, pausedPoller{l, l.poll})
			}
		}
	}
	c.mu.Unlock()
	if recovered {
		c.log.Info("Heartbeat recovered")
		if kickTick {
			select {
			case c.kickTick <- struct{}{}:
			default:
			}
		}
	}
	c.resume(paused)
}

// beatDeadline is the end of the heartbeat's trust window; c.mu is held.
func (c *Coordinator) beatDeadline() time.Time {
	return c.lastBeat.Add(c.cfg.HeartbeatTTL - c.cfg.heartbeatMargin())
}

// fenceIfStale runs when the heartbeat's trust window closes: unless a
// heartbeat succeeded meanwhile, the store may already list this instance as
// gone, so every poller pauses.
func (c *Coordinator) fenceIfStale() {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.mu.Lock()
	events := c.fenceIfClosed(c.now())
	c.mu.Unlock()
	c.deliver(events)
}

// fenceIfClosed pauses every poller when the heartbeat's trust window has
// closed at now and they are not paused yet, and returns the EventUncertain
// of each lease not paused already; c.emitMu and c.mu are held, and the
// caller delivers the events before it releases c.emitMu.
func (c *Coordinator) fenceIfClosed(now time.Time) []Event {
	if !c.running || c.fenced || now.Before(c.beatDeadline()) {
		return nil
	}
	c.fenced = true
	err := fmt.Errorf("polllease: no successful heartbeat since %s", c.lastBeat.Format(time.RFC3339Nano))
	var events []Event
	for _, l := range c.owned {
		if l.poll != nil {
			l.poll.cancel()
		}
		// A lease paused by a failed renewal was reported uncertain
		// already.
		if !l.uncertain {
			events = append(events, c.event(EventUncertain, l, "", err))
		}
	}
	c.log.Warn("Heartbeat trust window closed: pollers paused", slog.Any("error", err))
	return events
}
