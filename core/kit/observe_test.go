package kit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

// brief is what a test compares of an event.
func brief(e core.Event) string {
	s := fmt.Sprintf("%s %s %s/%s #%d", e.Kind, e.Outcome(), e.Primitive, e.Name, e.Token)
	if e.Try {
		s += " try"
	}
	if e.Handoff != "" {
		s += " handoff=" + e.Handoff
	}
	return s
}

// briefs waits for the first n events of rec and returns them in brief.
func briefs(t *testing.T, rec *locktest.Recorder, n int) []string {
	t.Helper()
	seen := 0
	rec.WaitFor(t, 10*time.Second, func(core.Event) bool { seen++; return seen == n })
	var out []string
	for _, e := range rec.Events()[:n] {
		out = append(out, brief(e))
	}
	return out
}

// scripted is a Locker whose acquires return what the test says.
type scripted struct {
	name string
	try  func(ctx context.Context) (core.Handle, error)
}

func (s scripted) Name() string                                        { return s.name }
func (s scripted) TryAcquire(ctx context.Context) (core.Handle, error) { return s.try(ctx) }
func (s scripted) Acquire(ctx context.Context) (core.Handle, error)    { return s.try(ctx) }

// inspecting is a scripted Locker that can tell its holder.
type inspecting struct{ scripted }

func (inspecting) Holder(context.Context) (core.Holder, bool, error) {
	return core.Holder{}, false, nil
}

type rwScripted struct {
	inspecting
	read core.Locker
}

func (l rwScripted) RLocker() core.Locker { return l.read }

func TestProbeNilIsFree(t *testing.T) {
	p := kit.NewProbe("test", nil, nil)
	if p != nil {
		t.Fatal("a probe without observers is not nil")
	}
	l := &scripted{name: "a"}
	if got := p.Mutex(l); got != core.Locker(l) {
		t.Fatal("a nil probe wrapped the Locker")
	}
}

func TestProbeReportsOutcomes(t *testing.T) {
	rec := new(locktest.Recorder)
	p := kit.NewProbe("test", nil, rec)
	var token uint64
	var next error // the error of the next acquire; nil grants
	l := p.Mutex(scripted{name: "a", try: func(ctx context.Context) (core.Handle, error) {
		if next != nil {
			return nil, next
		}
		token++
		return kit.NewHandle(token, noopRelease), nil
	}})
	ctx := context.Background()
	h, err := l.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next = kit.Busy("held")
	_, _ = l.TryAcquire(ctx)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	next = kit.NotAcquired(cancelled)
	_, _ = l.Acquire(cancelled)
	next = errors.New("server down")
	_, _ = l.Acquire(ctx)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next = nil
	h2, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2.(*kit.BaseHandle).Lose(errors.New("key deleted"))
	_ = h2.Release(ctx) // after a loss: no second end
	want := []string{
		"acquire acquired mutex/a #1 try",
		"acquire busy mutex/a #0 try",
		"wait waiting mutex/a #0",
		"acquire cancelled mutex/a #0",
		"wait waiting mutex/a #0",
		"acquire error mutex/a #0",
		"release released mutex/a #1",
		"wait waiting mutex/a #0",
		"acquire acquired mutex/a #2",
		"lost lost mutex/a #2",
	}
	if got := briefs(t, rec, len(want)); !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}
	events := rec.Events()
	if n := len(events); n != len(want) {
		t.Fatalf("%d events, want %d: a release after the loss was reported", n, len(want))
	}
	if e := events[9]; !errors.Is(e.Err, core.ErrLockLost) || e.Backend != "test" {
		t.Fatalf("lost event %+v: want the cause and the backend", e)
	}
}

// A grant lost before its acquire returns is reported lost after it is
// reported granted, once.
func TestProbeLossBeforeReturn(t *testing.T) {
	rec := new(locktest.Recorder)
	l := kit.NewProbe("test", nil, rec).Semaphore(scripted{name: "s", try: func(context.Context) (core.Handle, error) {
		h := kit.NewHandle(3, noopRelease)
		h.Lose(errors.New("gone at once"))
		return h, nil
	}})
	h, err := l.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.(*kit.BaseHandle).Lose(errors.New("again"))
	want := []string{"acquire acquired semaphore/s #3 try", "lost lost semaphore/s #3"}
	if got := briefs(t, rec, 2); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestProbeKeepsInterfaces(t *testing.T) {
	p := kit.NewProbe("test", nil, new(locktest.Recorder))
	plain := scripted{name: "a"}
	if _, ok := p.Mutex(inspecting{plain}).(core.Inspector); !ok {
		t.Error("a Mutex lost core.Inspector")
	}
	if _, ok := p.Semaphore(plain).(core.Inspector); ok {
		t.Error("a Semaphore gained core.Inspector")
	}
	rw := p.RWMutex(rwScripted{inspecting{plain}, plain})
	if _, ok := rw.(core.Inspector); !ok {
		t.Error("an RWMutex lost core.Inspector")
	}
	if _, ok := rw.RLocker().(core.Inspector); ok {
		t.Error("an RWMutex's read side gained core.Inspector")
	}
	if rw.Name() != "a" || rw.RLocker().Name() != "a" {
		t.Error("names changed")
	}
}

func TestProbeNamesPrimitives(t *testing.T) {
	rec := new(locktest.Recorder)
	p := kit.NewProbe("test", nil, rec)
	grant := func(context.Context) (core.Handle, error) { return kit.NewHandle(1, noopRelease), nil }
	rw := p.RWMutex(rwScripted{inspecting{scripted{"rw", grant}}, scripted{"rw", grant}})
	for _, l := range []core.Locker{rw, rw.RLocker()} {
		h, err := l.TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Release(context.Background())
	}
	want := []string{
		"acquire acquired rwmutex/rw #1 try", "release released rwmutex/rw #1",
		"acquire acquired rwmutex.read/rw #1 try", "release released rwmutex.read/rw #1",
	}
	if got := briefs(t, rec, 4); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// ctxKey marks the context of the caller's calls.
type ctxKey struct{}

// ctxObserver records which kinds of event came with the caller's context.
type ctxObserver struct {
	mu     sync.Mutex
	caller map[core.EventKind]bool
}

func (o *ctxObserver) Observe(ctx context.Context, e core.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.caller[e.Kind] = ctx.Value(ctxKey{}) != nil
}

// The events of a call come with its context, so that a tracer can make
// them children of the caller's span; a loss comes without.
func TestProbePassesCallersContext(t *testing.T) {
	obs := &ctxObserver{caller: make(map[core.EventKind]bool)}
	l := kit.NewProbe("test", nil, obs).Mutex(scripted{name: "a", try: func(context.Context) (core.Handle, error) {
		return kit.NewHandle(1, noopRelease), nil
	}})
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Release(ctx)
	h, _ = l.TryAcquire(ctx)
	h.(*kit.BaseHandle).Lose(nil)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := map[core.EventKind]bool{core.EventWait: true, core.EventAcquire: true, core.EventRelease: true, core.EventLost: false}
	if !maps.Equal(obs.caller, want) {
		t.Fatalf("caller's context by kind %v, want %v", obs.caller, want)
	}
}

// Two observers see every event, in order.
func TestProbeFansOut(t *testing.T) {
	a, b := new(locktest.Recorder), new(locktest.Recorder)
	l := kit.NewProbe("test", nil, a, nil, b).Mutex(scripted{name: "a", try: func(context.Context) (core.Handle, error) {
		return nil, kit.Busy("held")
	}})
	_, _ = l.TryAcquire(context.Background())
	if ga, gb := briefs(t, a, 1), briefs(t, b, 1); !slices.Equal(ga, gb) {
		t.Fatalf("observers saw %q and %q", ga, gb)
	}
}

func TestKeeperReportsRenewals(t *testing.T) {
	clock := locktest.NewFakeClock()
	var mu sync.Mutex
	verdict := error(nil)
	k := newKeeper(t, kit.KeeperConfig{
		TTL: 300 * time.Millisecond, Interval: 100 * time.Millisecond, Clock: clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			mu.Lock()
			defer mu.Unlock()
			return []error{verdict}
		},
	})
	rec := new(locktest.Recorder)
	var h *kit.BaseHandle
	l := kit.NewProbe("test", nil, rec).Mutex(scripted{name: "a", try: func(context.Context) (core.Handle, error) {
		h = kit.NewHandle(5, noopRelease)
		k.Keep(h, clock.Now(), nil)
		return h, nil
	}})
	if _, err := l.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	tick(t, clock, h, 100*time.Millisecond)
	mu.Lock()
	verdict = fmt.Errorf("gone: %w", core.ErrLockLost)
	mu.Unlock()
	tick(t, clock, h, 100*time.Millisecond)
	want := []string{
		"acquire acquired mutex/a #5 try",
		"renew renewed mutex/a #5",
		"renew lost mutex/a #5",
		"lost lost mutex/a #5",
	}
	if got := briefs(t, rec, 4); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// BenchmarkProbe is the cost of an uncontended acquire and release with
// no observer, with the probe's Lockers and an observer that does
// nothing, and with a recorder.
func BenchmarkProbe(b *testing.B) {
	inner := scripted{name: "a", try: func(context.Context) (core.Handle, error) {
		return kit.NewHandle(1, noopRelease), nil
	}}
	for _, c := range []struct {
		name string
		obs  core.Observer
	}{
		{"None", nil},
		{"Discard", discard{}},
	} {
		l := kit.NewProbe("bench", nil, c.obs).Mutex(inner)
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				h, err := l.TryAcquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = h.Release(ctx)
			}
		})
	}
}

type discard struct{}

func (discard) Observe(context.Context, core.Event) {}

// A Provider's logger gets the same lines from every backend; a logger
// that discards costs nothing.
func TestProbeLogs(t *testing.T) {
	if kit.NewProbe("test", slog.New(slog.DiscardHandler)) != nil {
		t.Fatal("a discarding logger made a probe")
	}
	var logged locktest.LogBuffer
	l := kit.NewProbe("test", logged.Logger()).Mutex(scripted{name: "a", try: func(context.Context) (core.Handle, error) {
		return kit.NewHandle(4, noopRelease), nil
	}})
	h, err := l.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.(*kit.BaseHandle).Lose(errors.New("key deleted"))
	want := `level=WARN msg="distlock: lock lost" backend=test primitive=mutex lock=a token=4 held=`
	if got := logged.String(); !strings.Contains(got, want) || !strings.Contains(got, `err="distlock: lock lost: key deleted"`) {
		t.Fatalf("logged:\n%s\nwant a line with %s", got, want)
	}
	if strings.Contains(logged.String(), "acquired") {
		t.Fatal("an acquire logged above Debug")
	}
}
