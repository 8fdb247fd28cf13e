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
	t       *testing.T
	store   *memStore
	det     *pollleasetest.Detector
	targets *targetSet
	mu      sync.Mutex
	nodes   map[string]*node
	events  []Event
}

type node struct {
	c      *Coordinator
	p      *memProvider
	cancel context.CancelFunc
	done   chan error
}

func newFleet(t *testing.T, targets []string) *fleet {
	f := &fleet{t: t, store: newMemStore(), det: pollleasetest.NewDetector(), targets: &targetSet{}, nodes: make(map[string]*node)}
	f.targets.set(targets)
	t.Cleanup(func() {
		for _, id := range f.ids() {
			f.stop(id)
		}
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
		OnEvent: func(e Event) {
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
		},
	}
}

func (f *fleet) start(id string) *node {
	f.t.Helper()
	p := newMemProvider(f.t, f.store, id, testLeaseTTL)
	c, err := New(f.config(id, p))
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{c: c, p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- c.Run(ctx) }()
	f.mu.Lock()
	f.nodes[id] = n
	f.mu.Unlock()
	return n
}

// stop stops an instance gracefully and returns Run's error.
func (f *fleet) stop(id string) error {
	f.mu.Lock()
	n := f.nodes[id]
	delete(f.nodes, id)
	f.mu.Unlock()
	if n == nil {
		return nil
	}
	n.cancel()
	return <-n.done
}

func (f *fleet) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (f *fleet) node(id string) *node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// owners maps each target some instance holds to the instances holding it.
func (f *fleet) owners() map[string][]string {
	out := make(map[string][]string)
	for _, id := range f.ids() {
		if n := f.node(id); n != nil {
			for _, t := range n.c.Owned() {
				if n.c.IsOwned(t) {
					out[t] = append(out[t], id)
				}
			}
		}
	}
	return out
}

// covered reports whether every target is held by exactly one instance.
func (f *fleet) covered() bool {
	want, _ := f.targets.get(context.Background())
	own := f.owners()
	if len(own) != len(want) {
		return false
	}
	for _, t := range want {
		if len(own[t]) != 1 {
			return false
		}
	}
	return true
}

// balanced reports whether the fleet is covered and every instance holds
// exactly the targets assigned to it.
func (f *fleet) balanced() bool {
	if !f.covered() {
		return false
	}
	want, _ := f.targets.get(context.Background())
	assign := Assign(want, f.ids(), DefaultLoadFactor)
	for t, ids := range f.owners() {
		if assign[t] != ids[0] {
			return false
		}
	}
	return true
}

func (f *fleet) eventsOf(kind EventKind, since time.Time) []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Event
	for _, e := range f.events {
		if e.Kind == kind && !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits for cond with a deadline.
var waitFor = pollleasetest.WaitFor
