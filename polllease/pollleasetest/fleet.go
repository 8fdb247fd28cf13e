package pollleasetest

import (
	"context"
	"slices"
	"sync"
)

// Member is what a Fleet needs to know of an instance: the targets it holds
// a lease on, and whether it may poll one now. *polllease.Coordinator has
// both.
type Member interface {
	Owned() []string
	IsOwned(target string) bool
}

// Fleet keeps track of the instances a test runs in its process. N is the
// test's own record of an instance (the Coordinator and whatever else the
// test needs of it). It is safe for concurrent use.
type Fleet[N Member] struct {
	mu    sync.Mutex
	nodes map[string]N
	stops map[string]func() error
}

// NewFleet returns an empty Fleet.
func NewFleet[N Member]() *Fleet[N] {
	return &Fleet[N]{nodes: make(map[string]N), stops: make(map[string]func() error)}
}

// Run starts run (a Coordinator's Run, say) on a goroutine and returns the
// func that cancels it and waits for its error.
func Run(run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// Add records instance id; stop is what Stop calls.
func (f *Fleet[N]) Add(id string, n N, stop func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[id], f.stops[id] = n, stop
}

// Stop forgets instance id and stops it, returning stop's error; nil for an
// unknown id.
func (f *Fleet[N]) Stop(id string) error {
	f.mu.Lock()
	stop := f.stops[id]
	delete(f.nodes, id)
	delete(f.stops, id)
	f.mu.Unlock()
	if stop == nil {
		return nil
	}
	return stop()
}

// StopAll stops every instance.
func (f *Fleet[N]) StopAll() {
	for _, id := range f.IDs() {
		_ = f.Stop(id)
	}
}

// IDs returns the ids of the running instances, sorted.
func (f *Fleet[N]) IDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.nodes))
	for id := range f.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Get returns instance id's record, and whether it is running.
func (f *Fleet[N]) Get(id string) (N, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	return n, ok
}

// Owners maps each target that some instance holds and may poll to the
// instances holding it.
func (f *Fleet[N]) Owners() map[string][]string {
	out := make(map[string][]string)
	for _, id := range f.IDs() {
		n, ok := f.Get(id)
		if !ok {
			continue
		}
		for _, t := range n.Owned() {
			if n.IsOwned(t) {
				out[t] = append(out[t], id)
			}
		}
	}
	return out
}

// Covered reports whether each of targets is held by exactly one instance.
func (f *Fleet[N]) Covered(targets []string) bool {
	own := f.Owners()
	for _, t := range targets {
		if len(own[t]) != 1 {
			return false
		}
	}
	return true
}

// Log collects values (events, say) from many goroutines.
type Log[E any] struct {
	mu   sync.Mutex
	list []E
}

// Add appends e.
func (l *Log[E]) Add(e E) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, e)
}

// Where returns the values keep accepts, in the order they were added.
func (l *Log[E]) Where(keep func(E) bool) []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []E
	for _, e := range l.list {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
