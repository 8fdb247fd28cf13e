package polllease

import (
	"context"
	"github.com/distlock/distlock/polllease/pollleasetest"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scaled-down timings for the in-memory fleet.
const (
	testLeaseTTL  = 2 * time.Second
	testBeatTTL   = 2 * time.Second
	testBeat      = 500 * time.Millisecond
	testReconcile = 250 * time.Millisecond
	testMinHold   = 250 * time.Millisecond
	testPollEvery = 50 * time.Millisecond
	testPollWork  = 10 * time.Millisecond
)

// targetSet is a Targets source the test can change.
type targetSet struct {
	mu sync.Mutex
	s  []string
}

func (ts *targetSet) set(s []string) {
	ts.mu.Lock()
	ts.s = slices.Clone(s)
	ts.mu.Unlock()
}

func (ts *targetSet) get(context.Context) ([]string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.s), nil
}

// fleet runs in-process instances over one memStore.
type fleet struct {
	*pollleasetest.Fleet[*node]
	t       *testing.T
	store   *memStore
	det     *pollleasetest.Detector
	targets *targetSet
	events  pollleasetest.Log[Event]
}

type node struct {
	c *Coordinator
	p *memProvider
}

func (n *node) Owned() []string            { return n.c.Owned() }
func (n *node) IsOwned(target string) bool { return n.c.IsOwned(target) }

func newFleet(t *testing.T, targets []string) *fleet {
	f := &fleet{Fleet: pollleasetest.NewFleet[*node](), t: t, store: newMemStore(), det: pollleasetest.NewDetector(), targets: &targetSet{}}
	f.targets.set(targets)
	t.Cleanup(func() {
		f.StopAll()
		require.Empty(t, f.det.Violations(), "one poller per target")
	})
	return f
}

func (f *fleet) config(id string, p *memProvider) Config {
	return Config{
		Provider:          p,
		Membership:        p,
		Group:             "fleet-" + f.t.Name(),
		InstanceID:        id,
		HeartbeatTTL:      testBeatTTL,
		HeartbeatInterval: testBeat,
		ReconcileInterval: testReconcile,
		MinHold:           testMinHold,
		Targets:           f.targets.get,
		Poll:              f.det.PollFunc(id, pollleasetest.Sleep(testPollWork)),
		PollInterval:      func(string) time.Duration { return testPollEvery },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent:           f.events.Add,
	}
}

func (f *fleet) start(id string) *node {
	f.t.Helper()
	return f.startWith(id, newMemProvider(f.t, f.store, id, testLeaseTTL))
}

// startWith starts an instance over p, a memProvider of f.store.
func (f *fleet) startWith(id string, p *memProvider) *node {
	f.t.Helper()
	c, err := New(f.config(id, p))
	require.NoError(f.t, err)
	n := &node{c: c, p: p}
	f.Add(id, n, pollleasetest.Run(c.Run))
	return n
}

func (f *fleet) node(id string) *node {
	n, _ := f.Get(id)
	return n
}

// covered reports whether every target is held by exactly one instance,
// and no other target is held.
func (f *fleet) covered() bool {
	want, _ := f.targets.get(context.Background())
	return len(f.Owners()) == len(want) && f.Covered(want)
}

// balanced reports whether the fleet is covered and every instance holds
// between Floor and Capacity targets: the assignment from the current
// owners is then the owners themselves, so nothing more moves.
func (f *fleet) balanced() bool {
	if !f.covered() {
		return false
	}
	want, _ := f.targets.get(context.Background())
	ids := f.IDs()
	floor, limit := Floor(len(want), len(ids), DefaultLoadFactor), Capacity(len(want), len(ids), DefaultLoadFactor)
	for _, id := range ids {
		if n := len(f.node(id).c.Owned()); n < floor || n > limit {
			return false
		}
	}
	return true
}

func (f *fleet) eventsOf(kind EventKind, since time.Time) []Event {
	return f.events.Where(func(e Event) bool { return e.Kind == kind && !e.Time.Before(since) })
}

// waitFor waits for cond with a deadline.
var waitFor = pollleasetest.WaitFor
