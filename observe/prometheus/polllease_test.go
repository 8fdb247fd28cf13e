package prometheus_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/filelock"
	distprom "github.com/distlock/distlock/observe/prometheus"
	"github.com/distlock/distlock/polllease"
)

func TestPollLeaseEvents(t *testing.T) {
	m := distprom.NewPollLease()
	e := serve(t, m)
	ev := func(kind polllease.EventKind, target string, reason polllease.Reason) {
		m.OnEvent(polllease.Event{Kind: kind, Target: target, Reason: reason})
	}
	want := func(owned, uncertain float64) {
		t.Helper()
		e.expect(t, map[string]float64{
			"distlock_polllease_owned{}":     owned,
			"distlock_polllease_uncertain{}": uncertain,
		})
	}
	ev(polllease.EventAcquired, "t1", "")
	ev(polllease.EventAcquired, "t2", "")
	ev(polllease.EventUncertain, "t1", "")
	want(2, 1)
	ev(polllease.EventResumed, "t1", "")
	ev(polllease.EventUncertain, "t2", "")
	ev(polllease.EventUncertain, "t3", "") // not held: not counted
	want(2, 1)
	ev(polllease.EventReleased, "t1", polllease.ReasonRebalance)
	ev(polllease.EventLost, "t2", "")
	want(0, 0)
	e.expect(t, map[string]float64{
		fmt.Sprintf("distlock_polllease_releases_total{reason=%q}", polllease.ReasonRebalance): 1,
		"distlock_polllease_lost_total{}": 1,
	})
}

// The PollLease series follow a Coordinator's leases on the file backend
// through a loss, a removed target and a stop.
func TestPollLeaseFile(t *testing.T) {
	m := distprom.NewPollLease()
	e := serve(t, m)
	dir := t.TempDir()
	var targets atomic.Pointer[[]string]
	targets.Store(&[]string{"t0", "t1", "t2"})
	p, err := filelock.New(dir, filelock.WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := polllease.New(polllease.Config{
		Provider:          p,
		Membership:        p,
		Group:             "prom",
		InstanceID:        "a",
		HeartbeatTTL:      2 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		ReconcileInterval: 250 * time.Millisecond,
		Targets:           func(context.Context) ([]string, error) { return slices.Clone(*targets.Load()), nil },
		Poll:              func(context.Context, string, uint64) error { return nil },
		PollInterval:      func(string) time.Duration { return 20 * time.Millisecond },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent:           m.OnEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(stop)

	series := func(name string) func() float64 {
		return func() float64 { return e.scrape(t)[name] }
	}
	owned, lost := series("distlock_polllease_owned{}"), series("distlock_polllease_lost_total{}")
	removed := series(fmt.Sprintf("distlock_polllease_releases_total{reason=%q}", polllease.ReasonRemoved))
	waitFor(t, "3 owned", func() bool { return owned() == 3 })

	// The lease files deleted: the backend ends the leases, and the
	// Coordinator takes the targets again.
	files, err := filepath.Glob(filepath.Join(dir, "mutex", "*.lock"))
	if err != nil || len(files) != 3 {
		t.Fatalf("lease files %v (%v), want 3", files, err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "3 lost", func() bool { return lost() == 3 })
	waitFor(t, "3 owned again", func() bool { return owned() == 3 && len(c.Owned()) == 3 })

	targets.Store(&[]string{"t0", "t1"})
	waitFor(t, "t2 released as removed", func() bool { return owned() == 2 && removed() == 1 })

	stop()
	e.expect(t, map[string]float64{
		"distlock_polllease_owned{}":      0,
		"distlock_polllease_uncertain{}":  0,
		"distlock_polllease_lost_total{}": 3,
		fmt.Sprintf("distlock_polllease_releases_total{reason=%q}", polllease.ReasonRemoved): 1,
		fmt.Sprintf("distlock_polllease_releases_total{reason=%q}", polllease.ReasonStop):    2,
	})
}

// waitFor waits for cond, checking every 10 ms, for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 15 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
