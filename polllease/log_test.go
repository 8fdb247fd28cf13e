package polllease

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/polllease/pollleasetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logRecord is one record a recorder captured, with the attributes added
// through With.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]slog.Value
	Time  time.Time
}

// recorder is a slog.Handler that captures records at level and above.
type recorder struct {
	log   *pollleasetest.Log[logRecord]
	level slog.Level
	with  []slog.Attr
}

func newRecorder(level slog.Level) *recorder {
	return &recorder{log: &pollleasetest.Log[logRecord]{}, level: level}
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]slog.Value{}
	for _, a := range r.with {
		attrs[a.Key] = a.Value
	}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value
		return true
	})
	r.log.Add(logRecord{Level: rec.Level, Msg: rec.Message, Attrs: attrs, Time: time.Now()})
	return nil
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorder{log: r.log, level: r.level, with: append(append([]slog.Attr(nil), r.with...), attrs...)}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// lines returns the records with message msg.
func (r *recorder) lines(msg string) []logRecord {
	return r.log.Where(func(l logRecord) bool { return l.Msg == msg })
}

func (r *recorder) all() []logRecord { return r.log.Where(func(logRecord) bool { return true }) }

// requireLine waits for a line msg about target at level, with the
// instance and a token, and returns the first.
func requireLine(t *testing.T, r *recorder, msg string, level slog.Level, key, target string) logRecord {
	t.Helper()
	match := func() []logRecord {
		return r.log.Where(func(l logRecord) bool {
			v, ok := l.Attrs[key]
			return l.Msg == msg && ok && v.String() == target
		})
	}
	waitFor(t, msg, 5*time.Second, func() bool { return len(match()) > 0 })
	line := match()[0]
	assert.Equal(t, level, line.Level, msg)
	assert.Contains(t, line.Attrs, "instance", msg)
	assert.Positive(t, line.Attrs["token"].Uint64(), msg)
	return line
}

// TestLogLinesAndState follows one lease through every change with the
// target logged as "endpoint" and the routine lines at Info: each change is
// one line with the instance, the target and the token, and State agrees
// with the events at each step.
func TestLogLinesAndState(t *testing.T) {
	const target = "endpoint-7"
	f := newFleet(t, []string{target})
	rec := newRecorder(slog.LevelDebug)
	p := newMemProvider(t, f.store, "solo", 3*time.Second)
	cfg := f.config("solo", p)
	cfg.Logger, cfg.TargetKey, cfg.RoutineLevel = slog.New(rec), "endpoint", slog.LevelInfo
	c, err := New(cfg)
	require.NoError(t, err)
	f.Add("solo", &node{c: c, p: p}, pollleasetest.Run(c.Run))

	acquired := requireLine(t, rec, "Lease acquired", slog.LevelInfo, "endpoint", target)
	requireLine(t, rec, "Poll started", slog.LevelInfo, "endpoint", target)
	requireLine(t, rec, "Lease renewed", slog.LevelInfo, "endpoint", target)
	st := c.State(target)
	assert.Equal(t, Owned, st.State)
	assert.Equal(t, acquired.Attrs["token"].Uint64(), st.Token)
	assert.Equal(t, f.eventsOf(EventAcquired, time.Time{})[0].Time, st.Since)

	checkPauseAndResume(t, f, p, rec, c, target)

	f.store.drop(c.LeaseName(target))
	lost := requireLine(t, rec, "Lease lost", slog.LevelWarn, "endpoint", target)
	assert.Contains(t, lost.Attrs, "error")
	waitFor(t, "acquired again", 5*time.Second, func() bool { return len(rec.lines("Lease acquired")) == 2 })

	require.NoError(t, f.Stop("solo"))
	released := requireLine(t, rec, "Lease released", slog.LevelInfo, "endpoint", target)
	assert.Equal(t, string(ReasonStop), released.Attrs["reason"].String())
	st = c.State(target)
	assert.Equal(t, NotOwned, st.State)
	assert.Equal(t, released.Attrs["token"].Uint64(), st.Token, "the last token held")
	assert.False(t, st.Since.Before(f.eventsOf(EventAcquired, time.Time{})[1].Time))

	for _, l := range rec.all() {
		assert.NotContains(t, l.Attrs, "target", "%q: the target is under TargetKey", l.Msg)
	}
}

// checkPauseAndResume fails the lease's renewals until it is uncertain,
// then lets them succeed until it resumes.
func checkPauseAndResume(t *testing.T, f *fleet, p *memProvider, rec *recorder, c *Coordinator, target string) {
	t.Helper()
	p.failRenew.Store(true)
	uncertain := requireLine(t, rec, "Lease uncertain", slog.LevelWarn, "endpoint", target)
	assert.Contains(t, uncertain.Attrs, "error")
	st := c.State(target)
	assert.Equal(t, Uncertain, st.State)
	assert.Equal(t, f.eventsOf(EventUncertain, time.Time{})[0].Time, st.Since)
	assert.False(t, c.IsOwned(target))

	snap, err := c.Snapshot(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.Leases, 1)
	assert.Equal(t, st, snap.Leases[0].State, "the snapshot carries the state")

	p.failRenew.Store(false)
	requireLine(t, rec, "Lease resumed", slog.LevelInfo, "endpoint", target)
	st = c.State(target)
	assert.Equal(t, Owned, st.State)
	assert.Equal(t, f.eventsOf(EventResumed, time.Time{})[0].Time, st.Since)
	assert.True(t, c.IsOwned(target))
}

// TestLogBusy: an acquire that finds the lease held is a Debug line naming
// the holder and its token, logged only where Debug is enabled.
func TestLogBusy(t *testing.T) {
	f := newFleet(t, nil) // no targets: only the manual acquires
	recA, recB := newRecorder(slog.LevelInfo), newRecorder(slog.LevelDebug)
	a, b := startLogged(t, f, "a", recA, nil), startLogged(t, f, "b", recB, nil)
	ctx := context.Background()
	waitFor(t, "running", 5*time.Second, func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 })

	require.NoError(t, a.TryAcquire(ctx, "x"))
	require.ErrorIs(t, b.TryAcquire(ctx, "x"), core.ErrNotAcquired)
	busy := recB.lines("Lease busy")
	require.Len(t, busy, 1)
	assert.Equal(t, slog.LevelDebug, busy[0].Level)
	assert.Equal(t, "b", busy[0].Attrs["instance"].String())
	assert.Equal(t, "x", busy[0].Attrs["target"].String())
	assert.Equal(t, "a", busy[0].Attrs["owner"].String())
	assert.Equal(t, a.State("x").Token, busy[0].Attrs["token"].Uint64())
	assert.Contains(t, busy[0].Attrs, "error")
}

// TestLogDefaultLevels: by default renewals and poll starts are Debug
// lines, and the target is under "target".
func TestLogDefaultLevels(t *testing.T) {
	f := newFleet(t, []string{"y"})
	rec := newRecorder(slog.LevelDebug)
	startLogged(t, f, "solo", rec, nil)
	requireLine(t, rec, "Lease acquired", slog.LevelInfo, "target", "y")
	requireLine(t, rec, "Poll started", slog.LevelDebug, "target", "y")
	requireLine(t, rec, "Lease renewed", slog.LevelDebug, "target", "y")
}

// startLogged starts an instance of f logging to rec, after edit changes
// its config.
func startLogged(t *testing.T, f *fleet, id string, rec *recorder, edit func(*Config)) *Coordinator {
	t.Helper()
	p := newMemProvider(t, f.store, id, testLeaseTTL)
	cfg := f.config(id, p)
	cfg.Logger = slog.New(rec)
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	f.Add(id, &node{c: c, p: p}, pollleasetest.Run(c.Run))
	return c
}
