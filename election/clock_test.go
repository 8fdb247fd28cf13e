package election_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
)

// fakeClock is an election.Clock that moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	added   chan struct{}
}

type fakeWaiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), added: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), d: d, ch: ch})
	select {
	case c.added <- struct{}{}:
	default:
	}
	return ch
}

// waiting waits until someone waits on the clock and returns the durations
// asked for, oldest first.
func (c *fakeClock) waiting(t *testing.T) []time.Duration {
	t.Helper()
	timeout := time.After(wait)
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
			t.Fatal("nobody waits on the clock")
		}
	}
}

// advance moves the clock by d and fires the waits that fall due.
func (c *fakeClock) advance(d time.Duration) {
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

func TestRetryBackoffFollowsClock(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	m.setFail(errors.New("store down"))
	clock := newFakeClock()
	b := kit.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	// plainLocker: no Inspector, so no observer waits on the clock too.
	c := start(t, plainLocker{m.as("a")}, election.Config{RetryBackoff: b, Clock: clock})
	for n, max := range []time.Duration{100, 200, 400, 400} {
		max *= time.Millisecond
		f := c.next(election.CampaignFailed)
		assert.Equal(t, clock.Now(), f.Time, "events carry the clock's time")
		ds := clock.waiting(t)
		require.Len(t, ds, 1)
		assert.GreaterOrEqual(t, ds[0], max/2, "failure %d", n)
		assert.LessOrEqual(t, ds[0], max, "failure %d", n)
		if n == 3 {
			m.setFail(nil)
		}
		clock.advance(ds[0])
	}
	c.next(election.Promoted)
}

func TestResignDelayFollowsClock(t *testing.T) {
	clock := newFakeClock()
	c := start(t, plainLocker{newMemLocker(uniqueName(t)).as("a")}, election.Config{
		ResignDelay: time.Minute,
		Clock:       clock,
	})
	p := c.next(election.Promoted)
	require.NoError(t, c.e.Resign(context.Background()))
	assert.Equal(t, []time.Duration{time.Minute}, clock.waiting(t))
	assert.False(t, c.e.IsLeader(), "a resigned candidate sits out ResignDelay")
	clock.advance(time.Minute)
	p2 := c.next(election.Promoted)
	assert.Greater(t, p2.Term, p.Term)
}

func TestPriorityDelayFollowsClock(t *testing.T) {
	clock := newFakeClock()
	m := newMemLocker(uniqueName(t))
	c := start(t, plainLocker{m.as("low")}, election.Config{
		Priority:      2,
		PriorityDelay: time.Second,
		Clock:         clock,
	})
	// The lock is free, yet the candidate first lets it sit for its delay.
	assert.Equal(t, []time.Duration{2 * time.Second}, clock.waiting(t))
	assert.False(t, c.e.IsLeader())
	clock.advance(2 * time.Second)
	c.next(election.Promoted)
}
