package polllease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// acquire makes one attempt at target's lease and starts its poller.
func (c *Coordinator) acquire(ctx context.Context, target string) error {
	h, err := c.cfg.Provider.Mutex(c.cfg.LeaseName(target)).TryAcquire(ctx)
	if err != nil {
		c.logBusy(ctx, target, err)
		return err
	}
	// The lease's state as granted: the watcher reports every change
	// from here on.
	rep, _ := h.(core.LeaseReporter)
	var seen core.LeaseState
	if rep != nil {
		var kept bool
		if seen, kept = rep.Lease(); !kept {
			rep = nil // nothing renews it: a connection-bound lock, say
		}
	}
	c.mu.Lock()
	if !c.running || c.fenced || c.owned[target] != nil {
		// Stopped, fenced or raced by a concurrent TryAcquire while the
		// attempt was in flight: give the grant back.
		err := kit.Busy("instance %s is not acquiring", c.id)
		if c.owned[target] != nil {
			err = kit.Busy("target %q is held by this instance", target)
		}
		c.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HeartbeatInterval)
		defer cancel()
		_ = h.Release(rctx)
		return err
	}
	l := &lease{target: target, h: h, token: h.FencingToken(), since: time.Now()}
	c.owned[target] = l
	delete(c.unowned, target)
	l.stopWatch = context.AfterFunc(h.Context(), func() {
		select {
		case c.kickSweep <- struct{}{}:
		default:
		}
	})
	c.startPoller(l)
	if rep != nil {
		l.unwatch = make(chan struct{})
		c.workers.Add(1)
	}
	ev := c.event(EventAcquired, l, "", nil)
	c.mu.Unlock()
	c.emit(ev)
	if rep != nil {
		// Started after EventAcquired is out, so the lease's events
		// follow it.
		go func() {
			defer c.workers.Done()
			c.watchLease(l, rep, seen, l.unwatch)
		}()
	}
	return nil
}

// attemptTimeout bounds one store call of the reconcile loop, so a hung
// store cannot stall it. It is generous: a call cut short may have taken
// effect on the store unknown to this instance.
func (c *Coordinator) attemptTimeout() time.Duration {
	return max(c.cfg.HeartbeatTTL/2, time.Second)
}

// detach removes l from the owned set, from then on NotOwned for State,
// and cancels its poller and its watcher; c.mu is held. The caller then
// waits for the poller and releases the handle.
func (c *Coordinator) detach(l *lease) {
	if c.owned[l.target] == l {
		delete(c.owned, l.target)
		c.unowned[l.target] = unowned{since: time.Now(), token: l.token}
	}
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.unwatch != nil {
		close(l.unwatch)
	}
	if l.poll != nil {
		l.poll.cancel()
	}
}

// releaseAll waits for the detached leases' pollers to stop, then releases
// them on the store, MaxParallel at a time, and reports each. The releases
// get a heartbeat interval, and at least kit.CleanupTimeout: a lease whose
// release does not answer in time expires by its TTL.
func (c *Coordinator) releaseAll(ctx context.Context, leases []*lease, reason Reason) error {
	if len(leases) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(c.cfg.HeartbeatInterval, kit.CleanupTimeout))
	defer cancel()
	sem := make(chan struct{}, max(1, c.cfg.MaxParallel))
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.release(rctx, l, reason)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// release gives l up once its poller has stopped and reports it
// EventReleased; a lease whose handle context ended first (lost on the
// store, or its trust window closed by the clock) is reported EventLost.
func (c *Coordinator) release(ctx context.Context, l *lease, reason Reason) error {
	if l.poll != nil {
		<-l.poll.done
	}
	if l.h.Context().Err() != nil {
		c.lose(ctx, l)
		return nil
	}
	err := l.h.Release(ctx)
	if err != nil {
		c.log.Warn("Lease release failed: it expires by its TTL", slog.String("target", l.target),
			slog.Uint64("token", l.token), slog.Any("error", err))
	}
	c.emit(c.event(EventReleased, l, reason, err))
	return err
}

// sweep drops the leases whose handle context ended (lost on the store).
func (c *Coordinator) sweep(ctx context.Context) {
	var lost []*lease
	c.mu.Lock()
	for _, l := range c.owned {
		if l.h.Context().Err() != nil {
			c.detach(l)
			lost = append(lost, l)
		}
	}
	c.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HeartbeatInterval)
	defer cancel()
	for _, l := range lost {
		if l.poll != nil {
			<-l.poll.done
		}
		c.lose(rctx, l)
	}
}

// lose reports l, whose handle context has ended, EventLost once the store
// has been asked to clean up whatever it still has: the lease is gone
// either way.
func (c *Coordinator) lose(ctx context.Context, l *lease) {
	_ = l.h.Release(ctx)
	c.emit(c.event(EventLost, l, "", context.Cause(l.h.Context())))
}

// watchLease follows the renewals of l's lease as the backend's keeper
// reports them through rep, from the state seen when it was acquired: each
// successful renewal is an EventRenewed; a failed one pauses l's poller
// (EventUncertain) until a renewal succeeds (EventResumed). It returns when
// l is detached (unwatch closes) or its handle's context ends; the sweep
// reports a loss.
func (c *Coordinator) watchLease(l *lease, rep core.LeaseReporter, seen core.LeaseState, unwatch <-chan struct{}) {
	for {
		changed := rep.LeaseChanged()
		now, _ := rep.Lease()
		if !c.leaseChanged(l, seen, now) {
			return
		}
		seen = now
		select {
		case <-changed:
		case <-unwatch:
			return
		case <-l.h.Context().Done():
			return
		}
	}
}

// leaseChanged applies a change of l's lease state from prev to now, and
// reports false when l is no longer this instance's live lease.
func (c *Coordinator) leaseChanged(l *lease, prev, now core.LeaseState) bool {
	c.emitMu.Lock()
	c.mu.Lock()
	if c.owned[l.target] != l || l.h.Context().Err() != nil {
		c.mu.Unlock()
		c.emitMu.Unlock()
		return false
	}
	var events []Event
	for n := prev.Renewals; n < now.Renewals; n++ {
		events = append(events, c.event(EventRenewed, l, "", nil))
	}
	var paused []pausedPoller
	switch {
	case now.Err != nil && !l.uncertain:
		// The lease is still ours until its trust window closes, but
		// the store may not have extended it: stop polling until a
		// renewal says it did, rather than poll into a takeover.
		l.uncertain = true
		if !c.fenced { // else paused and reported already
			if l.poll != nil {
				l.poll.cancel()
			}
			events = append(events, c.event(EventUncertain, l, "", now.Err))
		}
	case now.Err == nil && l.uncertain && !now.Expired(c.now()):
		// A renewal that ends past the trust window (its start was
		// before a freeze) does not make the lease pollable again.
		l.uncertain = false
		paused = append(paused, pausedPoller{l, l.poll})
	}
	c.mu.Unlock()
	c.deliver(events)
	c.emitMu.Unlock()
	c.resume(paused)
	return true
}

// pausedPoller is a lease whose poller was cancelled to pause it, and that
// poller.
type pausedPoller struct {
	l    *lease
	poll *poller
}

// resume restarts the pollers of paused leases that nothing keeps paused
// any more (the lease is still held, the heartbeat's trust window is open,
// its last renewal succeeded) and reports each with EventResumed. A paused
// poller was cancelled when it was paused; resume waits for it to return
// before its successor starts, so one instance never polls a target twice
// at once, and resumes nothing when someone else restarted it meanwhile.
func (c *Coordinator) resume(paused []pausedPoller) {
	if len(paused) == 0 {
		return
	}
	for _, p := range paused {
		if p.poll != nil {
			<-p.poll.done
		}
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	var events []Event
	c.mu.Lock()
	for _, p := range paused {
		l := p.l
		if !c.running || c.owned[l.target] != l || !c.mayPoll(l, c.now()) || l.poll != p.poll {
			continue
		}
		c.startPoller(l)
		events = append(events, c.event(EventResumed, l, "", nil))
	}
	c.mu.Unlock()
	c.deliver(events)
}

// startPoller starts l's poll loop; c.mu is held.
func (c *Coordinator) startPoller(l *lease) {
	ctx, cancel := context.WithCancel(l.h.Context())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	l.poll = p
	c.workers.Add(1)
	go func() {
		defer c.workers.Done()
		defer close(p.done)
		defer cancel()
		c.pollLoop(ctx, l)
	}()
}

func (c *Coordinator) pollLoop(ctx context.Context, l *lease) {
	interval := c.cfg.PollInterval(l.target)
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		if !c.pollable(l) {
			return
		}
		c.logPollStart(ctx, l)
		if err := c.cfg.Poll(ctx, l.target, l.token); err != nil && ctx.Err() == nil {
			c.log.Warn("Poll failed", slog.String("target", l.target), slog.Uint64("token", l.token), slog.Any("error", err))
		}
		timer.Reset(max(0, interval-time.Since(start)))
	}
}

// pollable is the check before each poll of l: it reports whether l is
// this instance's live lease and nothing pauses it. It reads the clock
// rather than trust the timers that end a lease's context and close the
// heartbeat's trust window: after the process was frozen (a GC pause, a VM
// migration, SIGSTOP) the poll timers can fire before those do. A lease
// whose trust window has closed by the clock is paused as uncertain (a
// renewal that succeeds resumes it, as after a failed renewal; the keeper
// ends it otherwise); a closed heartbeat window pauses every lease. Their
// EventUncertain is delivered before pollable returns, so before any poll.
func (c *Coordinator) pollable(l *lease) bool {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.mu.Lock()
	if c.owned[l.target] != l {
		c.mu.Unlock()
		return false
	}
	now := c.now()
	var events []Event
	if st, expired := leaseExpired(l.h, now); expired && !l.uncertain {
		l.uncertain = true
		if l.poll != nil {
			l.poll.cancel()
		}
		if !c.fenced { // else paused and reported already
			err := fmt.Errorf("polllease: lease of %q past its trust window (%s) by the clock: %w",
				l.target, st.Deadline.Format(time.RFC3339Nano), core.ErrLockLost)
			events = append(events, c.event(EventUncertain, l, "", err))
		}
	}
	events = append(events, c.fenceIfClosed(now)...)
	ok := c.mayPoll(l, now)
	c.mu.Unlock()
	c.deliver(events)
	return ok
}

// mayPoll reports whether l, a lease this instance holds, may be polled at
// now: its handle is live, its lease's and the heartbeat's trust windows
// are open by the clock, and neither a closed heartbeat window nor a failed
// renewal has paused it; c.mu is held.
func (c *Coordinator) mayPoll(l *lease, now time.Time) bool {
	if c.fenced || l.uncertain || l.h.Context().Err() != nil || !now.Before(c.beatDeadline()) {
		return false
	}
	_, expired := leaseExpired(l.h, now)
	return !expired
}

// leaseExpired returns the state of h's lease and whether its trust window
// has closed at now; a handle whose backend renews nothing never expires.
func leaseExpired(h core.Handle, now time.Time) (core.LeaseState, bool) {
	rep, ok := h.(core.LeaseReporter)
	if !ok {
		return core.LeaseState{}, false
	}
	st, kept := rep.Lease()
	return st, kept && st.Expired(now)
}
