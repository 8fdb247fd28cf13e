package locktest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// Recorder is a core.Observer that keeps the events it sees, for a test to
// read while the backend may still report. The zero value is ready.
type Recorder struct {
	mu      sync.Mutex
	events  []core.Event
	changed chan struct{} // closed at the next event; nil until someone waits
}

// Observe implements core.Observer.
func (r *Recorder) Observe(_ context.Context, e core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Events returns the events seen so far, in the order they were reported.
func (r *Recorder) Events() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// WaitFor returns the first event, from the start, that match accepts,
// waiting for it; it fails t when none comes within d. match sees each
// event once, in order.
func (r *Recorder) WaitFor(t testing.TB, d time.Duration, match func(core.Event) bool) core.Event {
	t.Helper()
	deadline := time.After(d)
	seen := 0
	for {
		r.mu.Lock()
		events := r.events[seen:]
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if i := slices.IndexFunc(events, match); i >= 0 {
			return events[i]
		}
		seen += len(events)
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no matching event within %v; seen: %v", d, r.Events())
			return core.Event{}
		}
	}
}

// testObserver: a Provider made with an observer reports the same events
// as every other backend: an acquire's outcome (acquired, busy, cancelled)
// with its token, the primitive and the name; a release; a loss, once,
// with a cause matching core.ErrLockLost and no release after it.
func testObserver(t *testing.T, s *suite) {
	var rec Recorder
	p := s.cfg.Observed(t, &rec)
	name := s.name("observed")
	l := p.Mutex(name)
	h := mustTry(t, l)
	if _, err := l.TryAcquire(bg()); err == nil {
		t.Fatal("a second TryAcquire of a held mutex succeeded")
	}
	ctx, cancel := context.WithTimeout(bg(), 20*time.Millisecond)
	_, err := l.Acquire(ctx)
	cancel()
	if err == nil {
		t.Fatal("an Acquire of a held mutex succeeded")
	}
	mustRelease(t, h)
	want := []string{
		"acquire acquired mutex try", "acquire busy mutex try",
		"wait waiting mutex", "acquire cancelled mutex",
		"release released mutex",
	}
	// A backend without reader-writer locks fails both sides before any
	// event.
	if rh, err := p.RWMutex(name).RLocker().TryAcquire(bg()); !errors.Is(err, core.ErrUnsupported) {
		if err != nil {
			t.Fatalf("RLocker().TryAcquire: %v", err)
		}
		mustRelease(t, rh)
		want = append(want, "acquire acquired rwmutex.read try", "release released rwmutex.read")
	}
	tokens := []uint64{h.FencingToken(), 0, 0, 0, h.FencingToken()}
	got := lockEvents(rec.Events())
	if len(got) != len(want) {
		t.Fatalf("events %v, want %q", got, want)
	}
	backend := got[0].Backend
	for i, e := range got {
		if g := e.Kind.String() + " " + e.Outcome() + " " + e.Primitive + tryMark(e); g != want[i] || e.Name != name || e.Backend != backend || backend == "" {
			t.Fatalf("event %d is %q %+v, want %q on %q", i, g, e, want[i], name)
		}
		if i < len(tokens) && e.Token != tokens[i] {
			t.Fatalf("event %d (%s) has token %d, want %d", i, want[i], e.Token, tokens[i])
		}
	}
	if s.cfg.Break == nil {
		return
	}
	h = mustTry(t, l)
	s.cfg.Break(t, h)
	lost := rec.WaitFor(t, s.cfg.lostWithin(), func(e core.Event) bool { return e.Kind == core.EventLost })
	if lost.Token != h.FencingToken() || !errors.Is(lost.Err, core.ErrLockLost) || lost.Primitive != "mutex" {
		t.Fatalf("lost event %+v, want the broken mutex's with a cause matching ErrLockLost", lost)
	}
	_ = h.Release(bg())
	for _, e := range rec.Events() {
		if e.Kind == core.EventRelease && e.Token == h.FencingToken() {
			t.Fatal("a release after the loss was reported too")
		}
	}
}

// lockEvents drops renewals, whose number depends on timing.
func lockEvents(all []core.Event) []core.Event {
	return slices.DeleteFunc(all, func(e core.Event) bool { return e.Kind == core.EventRenew })
}

func tryMark(e core.Event) string {
	if e.Try {
		return " try"
	}
	return ""
}
