package locktest

import (
	"sync"
	"testing"
	"time"
)

// FakeClock is a kit.Clock that moves only when the test says so, for
// tests of code that takes a Clock (kit.Keeper, election).
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWait
	added   chan struct{} // receives when a wait is added
}

type fakeWait struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

// NewFakeClock returns a FakeClock standing at 2026-01-01 00:00 UTC.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), added: make(chan struct{}, 1)}
}

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once the clock has been advanced
// by d; d ≤ 0 fires at once.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWait{at: c.now.Add(d), d: d, ch: ch})
	select {
	case c.added <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves the clock by d and fires the waits that fall due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// Jump moves the clock by d without firing any wait: the timers of a
// process that was frozen have not run yet when it resumes.
func (c *FakeClock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Waiting waits until something waits on the clock and returns the
// durations asked for, oldest first. It fails t after 10 s, which only a
// broken test reaches.
func (c *FakeClock) Waiting(t testing.TB) []time.Duration {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		var ds []time.Duration
		for _, w := range c.waiters {
			ds = append(ds, w.d)
		}
		c.mu.Unlock()
		if len(ds) > 0 {
			return ds
		}
		select {
		case <-c.added:
		case <-timeout:
			t.Fatal("nothing waits on the clock")
		}
	}
}
