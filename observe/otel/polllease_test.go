package otel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/filelock"
	distotel "github.com/distlock/distlock/observe/otel"
	"github.com/distlock/distlock/polllease"
	"github.com/distlock/distlock/polllease/pollleasetest"
)

// failing is a core.Membership whose calls fail while fail is set, so
// that a Coordinator's heartbeats fail against a working store.
type failing struct {
	core.Membership
	fail atomic.Bool
}

var errStoreDown = errors.New("membership store down")

func (m *failing) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if m.fail.Load() {
		return errStoreDown
	}
	return m.Membership.Register(ctx, group, id, ttl)
}

func (m *failing) Members(ctx context.Context, group string) ([]string, error) {
	if m.fail.Load() {
		return nil, errStoreDown
	}
	return m.Membership.Members(ctx, group)
}

// instance is one Coordinator over the file backend, as one process on
// the host would run it.
type instance struct {
	c          *polllease.Coordinator
	membership *failing
	stop       func()
}

// targets is the target set every instance reads, changed by the test.
type targets struct {
	mu   sync.Mutex
	list []string
}

func (ts *targets) get(context.Context) ([]string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.list), nil
}

func (ts *targets) set(list ...string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.list = list
}

func startInstance(t *testing.T, dir, id string, ts *targets, m *distotel.PollLease) *instance {
	t.Helper()
	p, err := filelock.New(dir, filelock.WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	in := &instance{membership: &failing{Membership: p}}
	in.c, err = polllease.New(polllease.Config{
		Provider:          p,
		Membership:        in.membership,
		Group:             "otel",
		InstanceID:        id,
		HeartbeatTTL:      2 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		ReconcileInterval: 250 * time.Millisecond,
		MinHold:           250 * time.Millisecond,
		Targets:           ts.get,
		Poll:              pollleasetest.Sleep(time.Millisecond),
		PollInterval:      func(string) time.Duration { return 20 * time.Millisecond },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent:           m.OnEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := pollleasetest.Run(in.c.Run)
	in.stop = sync.OnceFunc(func() {
		if err := stop(); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	})
	t.Cleanup(in.stop)
	return in
}

// waitFor collects the metrics until cond holds of them, for up to 15 s.
func (s sdk) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 15 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// value is the metric's data point with attrs, 0 when there is none.
func (s sdk) value(t *testing.T, name string, attrs ...attribute.KeyValue) float64 {
	v, _ := s.point(t, name, attrs...)
	return v
}

// The PollLease metrics follow a Coordinator's leases on the file backend
// through a pause, a loss, a removed target, moves to a second instance
// and a stop.
func TestPollLeaseFile(t *testing.T) {
	s := newSDK(t)
	m, err := distotel.NewPollLease(distotel.WithMeterProvider(s.mp))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ts := &targets{}
	ts.set("t0", "t1", "t2", "t3")
	owned := func() float64 { return s.value(t, "distlock.polllease.owned") }
	uncertain := func() float64 { return s.value(t, "distlock.polllease.uncertain") }
	reason := func(r polllease.Reason) attribute.KeyValue { return attribute.String("distlock.reason", string(r)) }

	a := startInstance(t, dir, "a", ts, m)
	s.waitFor(t, "a owns the 4 targets", func() bool { return owned() == 4 && len(a.c.Owned()) == 4 })

	// Heartbeats fail past their trust window: every poller pauses while
	// the leases are kept, and resumes when a heartbeat succeeds again.
	a.membership.fail.Store(true)
	s.waitFor(t, "4 uncertain", func() bool { return uncertain() == 4 })
	s.expect(t, 4, "distlock.polllease.owned")
	a.membership.fail.Store(false)
	s.waitFor(t, "none uncertain", func() bool { return uncertain() == 0 })

	// The lease files deleted: the backend ends every lease, and the
	// Coordinator takes the targets again.
	files, err := filepath.Glob(filepath.Join(dir, "mutex", "*.lock"))
	if err != nil || len(files) != 4 {
		t.Fatalf("lease files %v (%v), want 4", files, err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	s.waitFor(t, "4 lost", func() bool { return s.value(t, "distlock.polllease.lost") == 4 })
	s.waitFor(t, "the 4 targets owned again", func() bool { return owned() == 4 && len(a.c.Owned()) == 4 })

	ts.set("t0", "t1", "t2")
	s.waitFor(t, "t3 released as removed", func() bool {
		return owned() == 3 && s.value(t, "distlock.polllease.releases", reason(polllease.ReasonRemoved)) == 1
	})

	// A second instance: a moves the targets b is preferred for, and the
	// two instances' leases add up.
	b := startInstance(t, dir, "b", ts, m)
	s.waitFor(t, "moves to b", func() bool {
		return len(b.c.Owned()) > 0 && owned() == 3 &&
			s.value(t, "distlock.polllease.releases", reason(polllease.ReasonRebalance)) >= 1
	})

	a.stop()
	b.stop()
	s.expect(t, 0, "distlock.polllease.owned")
	s.expect(t, 0, "distlock.polllease.uncertain")
	s.expect(t, 4, "distlock.polllease.lost")
	s.expect(t, 1, "distlock.polllease.releases", reason(polllease.ReasonRemoved))
	// Each instance held at least one target when it stopped (b may take
	// what a gave up before it stops too).
	if stops := s.value(t, "distlock.polllease.releases", reason(polllease.ReasonStop)); stops < 2 {
		t.Errorf("%v leases released at the stop, want at least 2", stops)
	}
}
