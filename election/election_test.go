package election_test

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
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
)

func TestNewRejectsBrokenConfig(t *testing.T) {
	ok := election.Config{OnPromote: blockUntilDone}
	l := newMemLocker("x").as("a")
	tests := []struct {
		name   string
		locker core.Locker
		edit   func(*election.Config)
		want   error
		msg    string
	}{
		{"nil locker", nil, nil, core.ErrInvalidArgument, "nil Locker"},
		{"empty name", newMemLocker("").as("a"), nil, core.ErrInvalidName, ""},
		{"invalid UTF-8 name", newMemLocker("a\xffb").as("a"), nil, core.ErrInvalidName, ""},
		{"no OnPromote", l, func(c *election.Config) { c.OnPromote = nil }, core.ErrInvalidArgument, "OnPromote"},
		{"invalid UTF-8 ID", l, func(c *election.Config) { c.ID = "\xff" }, core.ErrInvalidArgument, "ID"},
		{"backoff max < min", l, func(c *election.Config) { c.RetryBackoff = kit.Backoff{Min: time.Second, Max: time.Millisecond} }, core.ErrInvalidArgument, "RetryBackoff"},
		{"backoff min 0", l, func(c *election.Config) { c.RetryBackoff = kit.Backoff{Max: time.Second} }, core.ErrInvalidArgument, "RetryBackoff"},
		{"negative health interval", l, func(c *election.Config) { c.HealthInterval = -1 }, core.ErrInvalidArgument, "HealthInterval"},
		{"negative priority", l, func(c *election.Config) { c.Priority = -1 }, core.ErrInvalidArgument, "Priority"},
		{"negative priority delay", l, func(c *election.Config) { c.PriorityDelay = -1 }, core.ErrInvalidArgument, "PriorityDelay"},
		{"negative resign delay", l, func(c *election.Config) { c.ResignDelay = -1 }, core.ErrInvalidArgument, "ResignDelay"},
		{"negative observe interval", l, func(c *election.Config) { c.ObserveInterval = -1 }, core.ErrInvalidArgument, "ObserveInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			e, err := election.New(tt.locker, cfg)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Nil(t, e)
		})
	}

	e, err := election.New(l, ok)
	require.NoError(t, err)
	assert.Equal(t, kit.DefaultIdentity(), e.ID(), "ID defaults to the process identity")
	assert.Equal(t, "x", e.Name())
}

func TestRunLeadsUntilStopped(t *testing.T) {
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{ID: "a"})
	ev := c.next(election.Promoted)
	assert.Equal(t, "a", ev.ID)
	assert.Equal(t, "a", ev.Leader)
	assert.NotZero(t, ev.Term)
	require.True(t, c.e.IsLeader())
	require.Equal(t, ev.Term, c.e.Term())

	require.NoError(t, c.stop())
	d := c.next(election.Demoted)
	assert.Equal(t, ev.Term, d.Term)
	assert.ErrorIs(t, d.Err, context.Canceled)
	assert.False(t, c.e.IsLeader())
	assert.Zero(t, c.e.Term())
	assert.Equal(t, []string{"promote 1", "demote"}, c.calls())
}

func TestPromoteContextEndsWithLeadership(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	causes := make(chan error, 10)
	c := start(t, m.as("a"), election.Config{
		ID:          "a",
		ResignDelay: time.Millisecond,
		OnPromote: func(ctx context.Context, term uint64) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
		},
	})

	tests := []struct {
		name string
		end  func()
		want error
	}{
		{"resign", func() { require.NoError(t, c.e.Resign(context.Background())) }, election.ErrResigned},
		{"lock lost", func() { require.True(t, m.lose()) }, core.ErrLockLost},
		{"run stopped", func() { require.NoError(t, c.stop()) }, context.Canceled},
	}
	var last uint64
	for _, tt := range tests {
		p := c.next(election.Promoted)
		require.Greater(t, p.Term, last, "terms strictly increase")
		last = p.Term
		tt.end()
		d := c.next(election.Demoted)
		assert.Equal(t, p.Term, d.Term, tt.name)
		assert.ErrorIs(t, d.Err, tt.want, tt.name)
		select {
		case cause := <-causes:
			assert.ErrorIs(t, cause, tt.want, tt.name)
		case <-time.After(wait):
			t.Fatalf("%s: OnPromote did not return", tt.name)
		}
	}
	assert.Equal(t, []string{"promote 1", "demote", "promote 2", "demote", "promote 3", "demote"}, c.calls())
}

func TestOnPromoteReturningEarlyKeepsLeadership(t *testing.T) {
	returned := make(chan struct{})
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{
		OnPromote: func(ctx context.Context, term uint64) { close(returned) },
	})
	c.next(election.Promoted)
	<-returned
	assert.True(t, c.e.IsLeader(), "leadership lasts until the term ends, not until OnPromote returns")
	require.NoError(t, c.e.Resign(context.Background()))
	assert.False(t, c.e.IsLeader())
	assert.Equal(t, []string{"promote 1", "demote"}, c.calls())
}

func TestResignHandsOverToFollower(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	cfg := election.Config{ResignDelay: time.Hour}
	a := start(t, m.as("a"), withID(cfg, "a"))
	pa := a.next(election.Promoted)
	b := start(t, m.as("b"), withID(cfg, "b"))

	require.NoError(t, a.e.Resign(context.Background()))
	assert.False(t, a.e.IsLeader())
	pb := b.next(election.Promoted)
	assert.Greater(t, pb.Term, pa.Term)
	assert.True(t, b.e.IsLeader())
	assert.NoError(t, a.e.Resign(context.Background()), "resigning a follower does nothing")
}

func TestResignHonoursContext(t *testing.T) {
	release := make(chan struct{})
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{
		OnPromote: func(ctx context.Context, term uint64) { <-release },
	})
	c.next(election.Promoted)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.e.Resign(ctx)
	require.ErrorIs(t, err, context.Canceled, "OnPromote has not returned, so the term has not ended")
	close(release)
	c.next(election.Demoted)
}

func TestHealthCheck(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{
		HealthInterval: 5 * time.Millisecond,
		HealthCheck: func(ctx context.Context) error {
			if healthy.Load() {
				return nil
			}
			return errors.New("disk full")
		},
	})
	p := c.next(election.Promoted)
	healthy.Store(false)
	d := c.next(election.Demoted)
	assert.ErrorIs(t, d.Err, election.ErrUnhealthy)
	assert.ErrorContains(t, d.Err, "disk full")
	f := c.next(election.CampaignFailed)
	assert.ErrorIs(t, f.Err, election.ErrUnhealthy, "an unhealthy follower does not campaign")
	assert.False(t, c.e.IsLeader())

	healthy.Store(true)
	p2 := c.next(election.Promoted)
	assert.Greater(t, p2.Term, p.Term)
}

func TestCampaignFailuresAreRetried(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	down := errors.New("store down")
	m.setFail(down)
	var metrics countingMetrics
	c := start(t, m.as("a"), election.Config{
		RetryBackoff: kit.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond},
		Metrics:      &metrics,
	})
	for range 3 {
		f := c.next(election.CampaignFailed)
		assert.ErrorIs(t, f.Err, down)
	}
	m.setFail(nil)
	c.next(election.Promoted)
	assert.True(t, metrics.leader(m.name))
	assert.GreaterOrEqual(t, metrics.failures(m.name), 3)

	require.NoError(t, c.stop())
	assert.False(t, metrics.leader(m.name))
	assert.Equal(t, 1, metrics.transitions(m.name, election.Promoted))
	assert.Equal(t, 1, metrics.transitions(m.name, election.Demoted))
}

func TestPermanentErrorsStopRun(t *testing.T) {
	for _, want := range []error{core.ErrInvalidName, core.ErrInvalidArgument, core.ErrUnsupported} {
		t.Run(want.Error(), func(t *testing.T) {
			e, err := election.New(kit.FailedLocker("x", want), election.Config{OnPromote: blockUntilDone})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			require.ErrorIs(t, e.Run(ctx), want)
			require.NoError(t, ctx.Err(), "Run returned at once")
		})
	}
}

func TestRunTwiceFails(t *testing.T) {
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{})
	c.next(election.Promoted)
	err := c.e.Run(context.Background())
	require.ErrorContains(t, err, "already running")
	require.True(t, c.e.IsLeader())
}

func TestLeader(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	a := start(t, m.as("a"), election.Config{ID: "a"})
	pa := a.next(election.Promoted)

	e, err := election.New(m.as("b"), election.Config{ID: "b", OnPromote: blockUntilDone})
	require.NoError(t, err)
	h, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, core.Holder{ID: "a", Token: pa.Term}, h)

	require.NoError(t, a.stop())
	_, err = e.Leader(context.Background())
	assert.ErrorIs(t, err, election.ErrNoLeader)

	plain, err := election.New(plainLocker{m.as("c")}, election.Config{OnPromote: blockUntilDone})
	require.NoError(t, err)
	_, err = plain.Leader(context.Background())
	assert.ErrorIs(t, err, core.ErrUnsupported)
}

func TestFollowerSeesNewLeader(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	seen := make(chan string, 10)
	a := start(t, m.as("a"), election.Config{ID: "a", ResignDelay: time.Hour})
	a.next(election.Promoted)
	b := start(t, m.as("b"), election.Config{
		ID:              "b",
		ObserveInterval: 5 * time.Millisecond,
		OnNewLeader:     func(id string) { seen <- id },
	})
	assert.Equal(t, "a", <-seen)
	assert.Equal(t, "a", b.next(election.LeaderChanged).Leader)
	require.NoError(t, a.e.Resign(context.Background()))
	assert.Equal(t, "b", <-seen)
	assert.Equal(t, "b", b.next(election.LeaderChanged).Leader)
}

func TestPriorityPrefersLowest(t *testing.T) {
	for _, inspect := range []bool{true, false} {
		t.Run(map[bool]string{true: "inspector", false: "polling"}[inspect], func(t *testing.T) {
			m := newMemLocker(uniqueName(t))
			locker := func(id string) core.Locker {
				if inspect {
					return m.as(id)
				}
				return plainLocker{m.as(id)}
			}
			leader := start(t, locker("leader"), election.Config{ID: "leader", ResignDelay: time.Hour})
			leader.next(election.Promoted)
			// The low-priority candidate starts first, so only priority
			// can make the preferred one win.
			low := start(t, locker("low"), election.Config{ID: "low", Priority: 1, PriorityDelay: time.Second})
			high := start(t, locker("high"), election.Config{ID: "high"})
			require.NoError(t, leader.e.Resign(context.Background()))
			high.next(election.Promoted)
			assert.False(t, low.e.IsLeader())
		})
	}
}

func TestAtMostOneLeader(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	var (
		mu      sync.Mutex
		leaders int
		last    uint64
		terms   atomic.Int32
	)
	promote := func(ctx context.Context, term uint64) {
		mu.Lock()
		leaders++
		if leaders > 1 {
			t.Errorf("%d leaders at term %d", leaders, term)
		}
		if term <= last {
			t.Errorf("term %d after %d", term, last)
		}
		last = term
		mu.Unlock()
		terms.Add(1)
		<-ctx.Done()
		mu.Lock()
		leaders--
		mu.Unlock()
	}
	var cs []*candidate
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		cs = append(cs, start(t, m.as(id), election.Config{ID: id, OnPromote: promote, ResignDelay: time.Millisecond}))
	}
	for terms.Load() < 30 {
		for _, c := range cs {
			if c.e.IsLeader() {
				_ = c.e.Resign(context.Background())
			}
		}
		time.Sleep(time.Millisecond) // pacing only; the checks are in promote
	}
}

func withID(c election.Config, id string) election.Config {
	c.ID = id
	return c
}

type countingMetrics struct {
	mu      sync.Mutex
	leading map[string]bool
	trans   map[string]map[election.EventKind]int
	fails   map[string]int
}

func (m *countingMetrics) SetLeader(name string, leader bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leading == nil {
		m.leading = map[string]bool{}
	}
	m.leading[name] = leader
}

func (m *countingMetrics) Transition(name string, kind election.EventKind, _ uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trans == nil {
		m.trans = map[string]map[election.EventKind]int{}
	}
	if m.trans[name] == nil {
		m.trans[name] = map[election.EventKind]int{}
	}
	m.trans[name][kind]++
}

func (m *countingMetrics) CampaignFailed(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails == nil {
		m.fails = map[string]int{}
	}
	m.fails[name]++
}

func (m *countingMetrics) leader(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading[name]
}

func (m *countingMetrics) failures(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fails[name]
}

func (m *countingMetrics) transitions(name string, kind election.EventKind) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trans[name][kind]
}

func TestResignFromOnPromote(t *testing.T) {
	var e atomic.Pointer[election.Election]
	ready := make(chan struct{})
	var once sync.Once
	resigned := make(chan error, 1)
	c := start(t, newMemLocker(uniqueName(t)).as("a"), election.Config{
		ResignDelay: time.Hour,
		OnPromote: func(ctx context.Context, term uint64) {
			<-ready
			once.Do(func() { resigned <- e.Load().Resign(ctx) })
			<-ctx.Done()
		},
	})
	e.Store(c.e)
	close(ready)
	require.NoError(t, <-resigned, "Resign with OnPromote's context does not wait for OnPromote")
	d := c.next(election.Demoted)
	assert.ErrorIs(t, d.Err, election.ErrResigned)
}

func TestReleaseFailureIsReported(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	m.relErr = errors.New("connection reset")
	c := start(t, m.as("a"), election.Config{})
	p := c.next(election.Promoted)
	require.NoError(t, c.e.Resign(context.Background()))
	d := c.next(election.Demoted)
	assert.ErrorIs(t, d.Err, election.ErrResigned)
	f := c.next(election.ReleaseFailed)
	assert.Equal(t, p.Term, f.Term)
	assert.ErrorContains(t, f.Err, "connection reset")
}

func TestUnhealthyFollowerDoesNotCampaign(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	a := start(t, m.as("a"), election.Config{ID: "a", ResignDelay: time.Millisecond})
	pa := a.next(election.Promoted)
	var healthy atomic.Bool
	healthy.Store(true)
	b := start(t, m.as("b"), election.Config{
		ID:             "b",
		HealthInterval: 5 * time.Millisecond,
		HealthCheck: func(context.Context) error {
			if healthy.Load() {
				return nil
			}
			return errors.New("no disk")
		},
	})
	healthy.Store(false)
	// b was waiting for the lock; its campaign round ends and the check
	// keeps it out.
	assert.ErrorIs(t, b.next(election.CampaignFailed).Err, election.ErrUnhealthy)
	require.NoError(t, a.e.Resign(context.Background()))
	pa2 := a.next(election.Promoted)
	assert.Greater(t, pa2.Term, pa.Term)
	assert.False(t, b.e.IsLeader())
	assert.Empty(t, b.calls())
}
