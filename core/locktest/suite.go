package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// TestProvider runs the whole conformance suite against the backend cfg
// describes. Call it from a top-level test function of its own: the
// abandonment cases re-run that test function in a child process.
func TestProvider(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil {
		t.Fatal("locktest: Config.New is nil")
	}
	if childMode(t, cfg) {
		return
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			for _, c := range mutexCases {
				t.Run(c.name, func(t *testing.T) {
					s := newSuite(t, cfg)
					if !s.supported(t, a) {
						return
					}
					c.run(t, s, s.factory(a))
				})
			}
		})
	}
	t.Run("RWMutex", func(t *testing.T) {
		for _, c := range rwCases {
			t.Run(c.name, func(t *testing.T) {
				s := newSuite(t, cfg)
				if !s.supported(t, adapters[1]) {
					return
				}
				c.run(t, s)
			})
		}
	})
	t.Run("Semaphore", func(t *testing.T) {
		for _, c := range semCases {
			t.Run(c.name, func(t *testing.T) {
				s := newSuite(t, cfg)
				if !s.supported(t, adapters[2]) {
					return
				}
				c.run(t, s)
			})
		}
	})
	t.Run("Inspector", func(t *testing.T) { testInspector(t, newSuite(t, cfg)) })
	t.Run("Verify", func(t *testing.T) { testVerify(t, newSuite(t, cfg)) })
	t.Run("Membership", func(t *testing.T) { testMembership(t, newSuite(t, cfg)) })
	t.Run("Announce", func(t *testing.T) { testAnnounce(t, newSuite(t, cfg)) })
	t.Run("Deadline", func(t *testing.T) { testDeadline(t, newSuite(t, cfg)) })
	t.Run("Lost", func(t *testing.T) { testLost(t, newSuite(t, cfg)) })
	t.Run("HandoffAfterBreak", func(t *testing.T) { testHandoffAfterBreak(t, newSuite(t, cfg)) })
	if cfg.Observed != nil {
		t.Run("Observer", func(t *testing.T) { testObserver(t, newSuite(t, cfg)) })
	}
	t.Run("Abandon", func(t *testing.T) { testAbandon(t, newSuite(t, cfg)) })
}

// mutexCase is a case every primitive runs, once per adapter.
type mutexCase struct {
	name string
	run  func(t *testing.T, s *suite, l lockerFunc)
}

// mutexCases is the runner list of mutex cases, run in this order. The
// cases live by concept: mutex.go (one holder, errors, names), fencing.go,
// contention.go (many waiters).
var mutexCases = []mutexCase{
	{"Basic", testBasic},
	{"NotReentrant", testNotReentrant},
	{"IdempotentRelease", testIdempotentRelease},
	{"TryAcquireBusy", testTryAcquireBusy},
	{"AcquireTimeout", testAcquireTimeout},
	{"CancelledContext", testCancelledContext},
	{"CancelWhileWaiting", testCancelWhileWaiting},
	{"HandleOutlivesAcquireContext", testHandleOutlivesContext},
	{"WaiterGetsReleasedLock", testWaiterGetsLock},
	{"Parallel100", testParallel},
	{"Names", testNames},
	{"FencingMonotonic", testFencing},
	{"FencingUnderContention", testFencingContended},
	{"WaitersGiveUpAroundRelease", testWaitersGiveUp},
}

// suite is one case's view of the backend: two Providers, as two processes
// would have, and a unique name prefix.
type suite struct {
	cfg    Config
	p1, p2 core.Provider
	prefix string
}

func newSuite(t *testing.T, cfg Config) *suite {
	return &suite{
		cfg:    cfg,
		p1:     cfg.New(t),
		p2:     cfg.New(t),
		prefix: fmt.Sprintf("locktest/%s/%08x/", t.Name(), rand.Uint32()),
	}
}

func (s *suite) name(n string) string { return s.prefix + n }

// supported probes the adapter's primitive. A backend without it must say
// so with ErrUnsupported from both acquire calls, and then the case has
// nothing more to check: it passes, with a note in the log.
func (s *suite) supported(t *testing.T, a adapter) bool {
	t.Helper()
	l := a.make(s.p1, s.name("probe"))
	h, err := l.TryAcquire(bg())
	if err == nil {
		_ = h.Release(bg())
		return true
	}
	if !errors.Is(err, core.ErrUnsupported) {
		return true // the case itself will look at the error
	}
	if h, err := l.Acquire(bg()); !errors.Is(err, core.ErrUnsupported) {
		if err == nil {
			_ = h.Release(bg())
		}
		t.Fatalf("%s: TryAcquire says ErrUnsupported but Acquire returned %v", a.name, err)
	}
	t.Logf("%s is not supported by this backend (it answers ErrUnsupported): nothing to check", a.name)
	return false
}

// adapter turns a primitive into a mutex so the mutex cases can run on it.
type adapter struct {
	name string
	// make returns the Locker for name; pre, when set, is how many
	// grants of the same name must be held elsewhere first.
	make func(p core.Provider, name string) core.Locker
	pre  int
}

var adapters = []adapter{
	{name: "Mutex", make: func(p core.Provider, n string) core.Locker { return p.Mutex(n) }},
	{name: "RWMutexWrite", make: func(p core.Provider, n string) core.Locker { return p.RWMutex(n) }},
	{name: "Semaphore1", make: func(p core.Provider, n string) core.Locker { return p.Semaphore(n, 1) }},
	{name: "Semaphore5With4Taken", make: func(p core.Provider, n string) core.Locker { return p.Semaphore(n, 5) }, pre: 4},
}

// lockerFunc returns the Locker under test for a name on one of the
// suite's Providers (0 or 1).
type lockerFunc func(t *testing.T, which int, name string) core.Locker

func (s *suite) factory(a adapter) lockerFunc {
	var mu sync.Mutex
	taken := map[string]bool{}
	return func(t *testing.T, which int, name string) core.Locker {
		p := s.p1
		if which == 1 {
			p = s.p2
		}
		mu.Lock()
		defer mu.Unlock()
		if a.pre > 0 && !taken[name] {
			taken[name] = true
			for range a.pre {
				h, err := a.make(s.p2, name).TryAcquire(context.Background())
				if err != nil {
					if errors.Is(err, core.ErrInvalidName) {
						break // the case itself expects this error
					}
					t.Fatalf("taking a slot of %q first: %v", name, err)
				}
				t.Cleanup(func() { _ = h.Release(context.Background()) })
			}
		}
		return a.make(p, name)
	}
}

func bg() context.Context { return context.Background() }

func mustAcquire(t *testing.T, l core.Locker) core.Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", l.Name(), err)
	}
	t.Cleanup(func() { _ = h.Release(bg()) })
	return h
}

func mustTry(t *testing.T, l core.Locker) core.Handle {
	t.Helper()
	h, err := l.TryAcquire(bg())
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", l.Name(), err)
	}
	t.Cleanup(func() { _ = h.Release(bg()) })
	return h
}

func mustBusy(t *testing.T, l core.Locker) {
	t.Helper()
	h, err := l.TryAcquire(bg())
	if err == nil {
		_ = h.Release(bg())
		t.Fatalf("TryAcquire(%q) succeeded on a held lock", l.Name())
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) on a held lock: %v, want an error matching ErrNotAcquired", l.Name(), err)
	}
}

func mustRelease(t *testing.T, h core.Handle) {
	t.Helper()
	if err := h.Release(bg()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// waitDone waits up to d for ctx to be done.
func waitDone(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(d):
		return false
	}
}
