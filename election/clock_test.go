package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/election"
)

func TestRetryBackoffFollowsClock(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	m.setFail(errors.New("store down"))
	clock := locktest.NewFakeClock()
	b := kit.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	// plainLocker: no Inspector, so no observer waits on the clock too.
	c := start(t, plainLocker{m.as("a")}, election.Config{RetryBackoff: b, Clock: clock})
	for n, max := range []time.Duration{100, 200, 400, 400} {
		max *= time.Millisecond
		f := c.next(election.CampaignFailed)
		assert.Equal(t, clock.Now(), f.Time, "events carry the clock's time")
		ds := clock.Waiting(t)
		require.Len(t, ds, 1)
		assert.GreaterOrEqual(t, ds[0], max/2, "failure %d", n)
		assert.LessOrEqual(t, ds[0], max, "failure %d", n)
		if n == 3 {
			m.setFail(nil)
		}
		clock.Advance(ds[0])
	}
	c.next(election.Promoted)
}

func TestResignDelayFollowsClock(t *testing.T) {
	clock := locktest.NewFakeClock()
	c := start(t, plainLocker{newMemLocker(uniqueName(t)).as("a")}, election.Config{
		ResignDelay: time.Minute,
		Clock:       clock,
	})
	p := c.next(election.Promoted)
	require.NoError(t, c.e.Resign(context.Background()))
	assert.Equal(t, []time.Duration{time.Minute}, clock.Waiting(t))
	assert.False(t, c.e.IsLeader(), "a resigned candidate sits out ResignDelay")
	clock.Advance(time.Minute)
	p2 := c.next(election.Promoted)
	assert.Greater(t, p2.Term, p.Term)
}

func TestPriorityDelayFollowsClock(t *testing.T) {
	clock := locktest.NewFakeClock()
	m := newMemLocker(uniqueName(t))
	c := start(t, plainLocker{m.as("low")}, election.Config{
		Priority:      2,
		PriorityDelay: time.Second,
		Clock:         clock,
	})
	// The lock is free, yet the candidate first lets it sit for its delay.
	assert.Equal(t, []time.Duration{2 * time.Second}, clock.Waiting(t))
	assert.False(t, c.e.IsLeader())
	clock.Advance(2 * time.Second)
	c.next(election.Promoted)
}

// leasedLocker grants handles whose lease a kit.Keeper keeps on the test's
// clock, with every renewal failing as if the servers were out of reach: a
// renewal never moves a trust window, and only the clock closes one. It grants the lock once: a deposed leader does not win again.
type leasedLocker struct {
	name    string
	clock   *locktest.FakeClock
	keeper  *kit.Keeper
	granted atomic.Bool
}

func newLeasedLocker(t *testing.T, clock *locktest.FakeClock, ttl time.Duration) *leasedLocker {
	k, err := kit.NewKeeper(kit.KeeperConfig{
		TTL:   ttl,
		Clock: clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			errs := make([]error, len(b))
			for i := range errs {
				errs[i] = errors.New("the servers are out of reach")
			}
			return errs
		},
	})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return &leasedLocker{name: uniqueName(t), clock: clock, keeper: k}
}

func (l *leasedLocker) Name() string { return l.name }

func (l *leasedLocker) TryAcquire(context.Context) (core.Handle, error) {
	if l.granted.Swap(true) {
		return nil, kit.Busy("granted once")
	}
	h := kit.NewHandle(1, func(context.Context) error { return nil })
	l.keeper.Keep(h, l.clock.Now(), nil)
	return h, nil
}

func (l *leasedLocker) Acquire(ctx context.Context) (core.Handle, error) {
	if h, err := l.TryAcquire(ctx); err == nil {
		return h, nil
	}
	<-ctx.Done()
	return nil, kit.NotAcquired(ctx)
}

// TestTermEndsWhenTrustWindowCloses: the clock passes the end of the term's
// trust window while no timer fires (a leader resumed after SIGSTOP): the
// first look at IsLeader, Term or the term's context sees the term over.
func TestTermEndsWhenTrustWindowCloses(t *testing.T) {
	const ttl = time.Second // the window: TTL − 0 margin
	looks := map[string]func(*election.Election, context.Context) bool{
		"IsLeader": func(e *election.Election, _ context.Context) bool { return e.IsLeader() },
		"Term":     func(e *election.Election, _ context.Context) bool { return e.Term() != 0 },
		"ctx.Err":  func(_ *election.Election, ctx context.Context) bool { return ctx.Err() == nil },
		"ctx.Done": func(_ *election.Election, ctx context.Context) bool {
			select {
			case <-ctx.Done():
				return false
			default:
				return true
			}
		},
	}
	for name, leading := range looks {
		t.Run(name, func(t *testing.T) {
			clock := locktest.NewFakeClock()
			terms := make(chan context.Context, 1)
			c := start(t, newLeasedLocker(t, clock, ttl), election.Config{
				Clock: clock,
				OnPromote: func(ctx context.Context, term uint64) {
					terms <- ctx
					<-ctx.Done()
				},
			})
			p := c.next(election.Promoted)
			ctx := <-terms
			clock.Jump(ttl - time.Millisecond)
			require.True(t, leading(c.e, ctx), "the term ended inside its trust window")
			clock.Jump(time.Millisecond)
			assert.False(t, leading(c.e, ctx), "%s reports the term live after its trust window closed", name)
			assert.False(t, c.e.IsLeader())
			assert.Zero(t, c.e.Term())
			require.Error(t, ctx.Err())
			assert.ErrorIs(t, context.Cause(ctx), core.ErrLockLost)
			d := c.next(election.Demoted)
			assert.Equal(t, p.Term, d.Term)
			assert.ErrorIs(t, d.Err, core.ErrLockLost)
		})
	}
}
