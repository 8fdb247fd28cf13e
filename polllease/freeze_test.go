package polllease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/polllease/pollleasetest"
)

// jumpClock is the wall clock plus an offset that a test moves at once, as
// a process resumed after a freeze sees it: the trust windows have closed
// by the clock while the timers that act on them have not fired.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *jumpClock) jump(d time.Duration) { c.offset.Add(int64(d)) }

// TestClockPastTrustWindowPausesBeforePoll moves the Coordinator's clock
// past a trust window without any timer firing: the lease's (which the
// keeper would end) or the heartbeat's (which the fence timer would close; heartbeats fail meanwhile).
// IsOwned turns false at once, every lease is reported uncertain, and no
// poll starts before its target's EventUncertain. A lease past its own
// window stays paused; the heartbeat's window reopens with the next
// heartbeat and the polls resume.
func TestClockPastTrustWindowPausesBeforePoll(t *testing.T) {
	cases := []struct {
		name              string
		leaseTTL, beatTTL time.Duration
		jump              time.Duration
		lostErr           bool // the uncertain events match core.ErrLockLost
	}{
		{"lease window", 3 * time.Second, 30 * time.Second, 4 * time.Second, true},
		{"heartbeat window", 30 * time.Second, testBeatTTL, testBeatTTL, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targets := targetNames(3)
			f := newFleet(t, targets)
			clock := &jumpClock{}
			var (
				mu      sync.Mutex
				jumpAt  time.Time // zero until the jump
				early   []string  // polls started after the jump before their target's EventUncertain
				started atomic.Int64
			)
			p := newMemProvider(t, f.store, "solo", tc.leaseTTL)
			// Heartbeats fail from the jump on, so that only the clock,
			// not a heartbeat started after it, decides the fence.
			m := &flakyMembership{memProvider: p}
			cfg := f.config("solo", p)
			cfg.Membership = m
			cfg.HeartbeatTTL = tc.beatTTL
			poll := cfg.Poll
			cfg.Poll = func(ctx context.Context, target string, token uint64) error {
				mu.Lock()
				at := jumpAt
				mu.Unlock()
				if !at.IsZero() {
					started.Add(1)
					if len(f.events.Where(func(e Event) bool {
						return e.Kind == EventUncertain && e.Target == target && !e.Time.Before(at)
					})) == 0 {
						mu.Lock()
						early = append(early, target)
						mu.Unlock()
					}
				}
				return poll(ctx, target, token)
			}
			c, err := New(cfg)
			require.NoError(t, err)
			c.now = clock.now
			f.Add("solo", &node{c: c, p: p}, pollleasetest.Run(c.Run))
			waitFor(t, "covered", 5*time.Second, f.covered)

			mu.Lock()
			jumpAt = time.Now()
			m.fail.Store(!tc.lostErr)
			clock.jump(tc.jump)
			mu.Unlock()
			for _, tg := range targets {
				assert.False(t, c.IsOwned(tg), "%s owned past its trust window", tg)
			}
			waitFor(t, "uncertain events", 5*time.Second, func() bool {
				return len(f.eventsOf(EventUncertain, jumpAt)) == len(targets)
			})
			for _, e := range f.eventsOf(EventUncertain, jumpAt) {
				assert.Equal(t, tc.lostErr, errors.Is(e.Err, core.ErrLockLost), "%s: %v", e.Target, e.Err)
			}
			if tc.lostErr {
				// Every poller has met its check and stopped: none polls
				// again under a lease past its window.
				assert.Zero(t, started.Load(), "polls started under expired leases")
				assert.Equal(t, targets, c.Owned(), "the keeper, not the clock, ends the lease")
			} else {
				m.fail.Store(false)
				waitFor(t, "resumed after a heartbeat", 5*time.Second, func() bool {
					return len(f.eventsOf(EventResumed, jumpAt)) == len(targets) && started.Load() > 0
				})
			}
			mu.Lock()
			assert.Empty(t, early, "polls started before their target's EventUncertain")
			mu.Unlock()
		})
	}
}
