package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
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
	t.Run("Lost", func(t *testing.T) { testLost(t, newSuite(t, cfg)) })
	t.Run("HandoffAfterBreak", func(t *testing.T) { testHandoffAfterBreak(t, newSuite(t, cfg)) })
	t.Run("Abandon", func(t *testing.T) { testAbandon(t, newSuite(t, cfg)) })
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

type mutexCase struct {
	name string
	run  func(t *testing.T, s *suite, l lockerFunc)
}

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

func testBasic(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("basic")
	a := l(t, 0, name)
	if a.Name() != name {
		t.Fatalf("Name() = %q, want %q", a.Name(), name)
	}
	h := mustTry(t, a)
	if h.FencingToken() == 0 {
		t.Fatal("FencingToken() = 0, want > 0")
	}
	if isDone(h.Context()) {
		t.Fatalf("a fresh handle's context is done: %v", context.Cause(h.Context()))
	}
	mustBusy(t, l(t, 1, name))
	mustRelease(t, h)
	if !isDone(h.Context()) {
		t.Fatal("context not done after Release")
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrReleased) || errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause after Release = %v, want ErrReleased", cause)
	}
	mustRelease(t, mustTry(t, l(t, 1, name)))
}

func testNotReentrant(t *testing.T, s *suite, l lockerFunc) {
	a := l(t, 0, s.name("reentrant"))
	mustTry(t, a)
	mustBusy(t, a)
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	defer cancel()
	if h, err := a.Acquire(ctx); err == nil {
		_ = h.Release(bg())
		t.Fatal("the same Locker acquired a lock it already holds")
	}
}

func testIdempotentRelease(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("idempotent")
	h1 := mustTry(t, l(t, 0, name))
	mustRelease(t, h1)
	mustRelease(t, h1)
	h2 := mustTry(t, l(t, 1, name))
	// A stale handle's release must not free the later holder's grant.
	mustRelease(t, h1)
	mustBusy(t, l(t, 0, name))
	if isDone(h2.Context()) {
		t.Fatalf("a stale release ended the new holder's context: %v", context.Cause(h2.Context()))
	}
}

func testTryAcquireBusy(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("busy")
	mustTry(t, l(t, 0, name))
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	h, err := l(t, 1, name).TryAcquire(ctx)
	if err == nil {
		_ = h.Release(bg())
		t.Fatal("TryAcquire succeeded on a held lock")
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired", err)
	}
	if ctx.Err() != nil {
		t.Fatal("TryAcquire waited instead of failing at once")
	}
}

func testAcquireTimeout(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("timeout")
	mustTry(t, l(t, 0, name))
	ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	h, err := l(t, 1, name).Acquire(ctx)
	took := time.Since(start)
	if err == nil {
		_ = h.Release(bg())
		t.Fatal("Acquire succeeded on a held lock")
	}
	if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one matching ErrNotAcquired and context.DeadlineExceeded", err)
	}
	// The contract: a 200 ms deadline returns within 500 ms.
	if took > 500*time.Millisecond {
		t.Fatalf("Acquire with a 200ms deadline returned after %v, want ≤ 500ms", took)
	}
}

func testCancelledContext(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("cancelled")
	ctx, cancel := context.WithCancel(bg())
	cancel()
	for _, op := range []struct {
		name string
		f    func(context.Context) (core.Handle, error)
	}{{"TryAcquire", l(t, 0, name).TryAcquire}, {"Acquire", l(t, 0, name).Acquire}} {
		h, err := op.f(ctx)
		if err == nil {
			_ = h.Release(bg())
			t.Fatalf("%s with a cancelled context succeeded", op.name)
		}
		if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: err = %v, want one matching ErrNotAcquired and context.Canceled", op.name, err)
		}
	}
	mustRelease(t, mustTry(t, l(t, 1, name)))
}

func testCancelWhileWaiting(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("cancelwait")
	holder := mustTry(t, l(t, 0, name))
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() {
		h, err := l(t, 1, name).Acquire(ctx)
		if err == nil {
			_ = h.Release(bg())
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter start waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want one matching ErrNotAcquired and context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return after its context was cancelled")
	}
	mustRelease(t, holder)
	// The cancelled waiter must not have left a grant behind.
	mustRelease(t, mustAcquire(t, l(t, 0, name)))
}

func testHandleOutlivesContext(t *testing.T, s *suite, l lockerFunc) {
	ctx, cancel := context.WithCancel(bg())
	h, err := l(t, 0, s.name("outlive")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(bg()) }()
	cancel()
	if waitDone(h.Context(), 100*time.Millisecond) {
		t.Fatalf("cancelling the acquire context ended the handle: %v", context.Cause(h.Context()))
	}
	mustBusy(t, l(t, 1, s.name("outlive")))
}

func testWaiterGetsLock(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("handoff")
	holder := mustTry(t, l(t, 0, name))
	got := make(chan core.Handle, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
		defer cancel()
		h, err := l(t, 1, name).Acquire(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- h
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter start waiting
	tok := holder.FencingToken()
	mustRelease(t, holder)
	select {
	case h := <-got:
		defer mustRelease(t, h)
		if h.FencingToken() <= tok {
			t.Fatalf("waiter's token %d ≤ previous holder's %d", h.FencingToken(), tok)
		}
	case err := <-errc:
		t.Fatalf("waiter: %v", err)
	}
}

func testParallel(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("parallel")
	const n = 100
	var inside, peak, grants atomic.Int32
	lockers := []core.Locker{l(t, 0, name), l(t, 1, name)}
	hammer(t, n, func(i int) core.Locker { return lockers[i%2] }, func(int) {
		raise(&peak, inside.Add(1))
		grants.Add(1)
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		inside.Add(-1)
	})
	if peak.Load() > 1 {
		t.Fatalf("%d holders were inside the critical section at once", peak.Load())
	}
	if grants.Load() != n {
		t.Fatalf("%d grants, want %d", grants.Load(), n)
	}
}

// hammer runs n goroutines; goroutine i acquires pick(i), runs work(i) while
// holding it and releases it. Errors fail the test.
func hammer(t *testing.T, n int, pick func(i int) core.Locker, work func(i int)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := pick(i).Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			work(i)
			if err := h.Release(bg()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// raise makes peak at least n.
func raise(peak *atomic.Int32, n int32) {
	for {
		m := peak.Load()
		if n <= m || peak.CompareAndSwap(m, n) {
			return
		}
	}
}

// Names that must work on every backend.
var goodNames = []string{
	strings.Repeat("x", 1000),
	`back\slash\`,
	"for/ward/slash/",
	"..",
	"../../../../etc/passwd",
	"nul\x00byte",
	"emoji 🔒🗝️",
	" spaces and\ttabs ",
	"CON", // a reserved device name on Windows
	"名前",
}

func testNames(t *testing.T, s *suite, l lockerFunc) {
	for _, bad := range []string{"", "bad\xffutf8"} {
		for _, op := range []string{"TryAcquire", "Acquire"} {
			lk := l(t, 0, bad)
			f := lk.TryAcquire
			if op == "Acquire" {
				f = lk.Acquire
			}
			h, err := f(bg())
			if err == nil {
				_ = h.Release(bg())
				t.Fatalf("%s(%q) succeeded", op, bad)
			}
			if !errors.Is(err, core.ErrInvalidName) {
				t.Fatalf("%s(%q): %v, want ErrInvalidName", op, bad, err)
			}
		}
	}
	for _, n := range goodNames {
		name := s.name(n)
		lk := l(t, 0, name)
		if lk.Name() != name {
			t.Fatalf("Name() = %q, want %q", lk.Name(), name)
		}
		h := mustTry(t, lk)
		mustBusy(t, l(t, 1, name))
		mustRelease(t, h)
	}
	// Names that differ only in case, or only at the end of a long name,
	// are different locks.
	long := strings.Repeat("y", 999)
	for _, pair := range [][2]string{{"CaseName", "casename"}, {long + "a", long + "b"}, {"a/b", "a_b"}} {
		h1 := mustTry(t, l(t, 0, s.name(pair[0])))
		h2 := mustTry(t, l(t, 1, s.name(pair[1])))
		mustRelease(t, h1)
		mustRelease(t, h2)
	}
}

func testFencing(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("fence")
	var last uint64
	for i := range 6 {
		h := mustAcquire(t, l(t, i%2, name))
		if tok := h.FencingToken(); tok <= last {
			t.Fatalf("grant %d: token %d ≤ previous %d", i, tok, last)
		}
		last = h.FencingToken()
		mustRelease(t, h)
	}
}

// testFencingContended: workers of both Providers take turns on one lock
// (a backend that hands a lock on within a process does so here, and lets
// the other process in between): one holder at a time, every grant's token
// above the one before it, every worker served.
func testFencingContended(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("fence-contended")
	const workers, each = 6, 15
	ctx, cancel := context.WithTimeout(bg(), 2*time.Minute)
	defer cancel()
	lockers := []core.Locker{l(t, 0, name), l(t, 1, name)}
	var (
		mu     sync.Mutex
		inside int
		last   uint64
		grants [workers]int
		wg     sync.WaitGroup
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				h, err := lockers[i%2].Acquire(ctx)
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				if tok := h.FencingToken(); tok <= last {
					t.Errorf("token %d after %d", tok, last)
				}
				last = h.FencingToken()
				grants[i]++
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				mu.Lock()
				inside--
				mu.Unlock()
				if err := h.Release(bg()); err != nil {
					t.Errorf("worker %d: release: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range grants {
		if n != each {
			t.Errorf("worker %d got %d grants, want %d", i, n, each)
		}
	}
}

// testWaitersGiveUp: waiters of both Providers whose contexts end at any
// moment around a release never leave the lock held: a grant made or
// handed to them as they gave up is released again.
func testWaitersGiveUp(t *testing.T, s *suite, l lockerFunc) {
	name := s.name("giveup")
	for round := range 20 {
		h := mustTry(t, l(t, 0, name))
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(bg(), time.Duration(rand.IntN(3000))*time.Microsecond)
				defer cancel()
				wh, err := l(t, w%2, name).Acquire(ctx)
				switch {
				case err == nil:
					if err := wh.Release(bg()); err != nil {
						t.Errorf("release: %v", err)
					}
				case !errors.Is(err, core.ErrNotAcquired):
					t.Errorf("err = %v, want one matching ErrNotAcquired", err)
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		mustRelease(t, h)
		wg.Wait()
		free, err := l(t, 1, name).TryAcquire(bg())
		if err != nil {
			t.Fatalf("round %d: the lock was left held: %v", round, err)
		}
		mustRelease(t, free)
	}
}

// testInspector: a Mutex or RWMutex whose Locker implements core.Inspector
// reports the holder another Provider's handle is: held, with that handle's
// fencing token and a non-empty identity, and free again after the release.
// The read side of an RWMutex has many holders and must not implement it.
func testInspector(t *testing.T, s *suite) {
	lockers := map[string]func(p core.Provider) core.Locker{
		"Mutex":   func(p core.Provider) core.Locker { return p.Mutex(s.name("inspect-mutex")) },
		"RWMutex": func(p core.Provider) core.Locker { return p.RWMutex(s.name("inspect-rw")) },
	}
	for _, kind := range []string{"Mutex", "RWMutex"} {
		t.Run(kind, func(t *testing.T) {
			insp, ok := lockers[kind](s.p2).(core.Inspector)
			if !ok {
				t.Logf("the %s Locker does not implement core.Inspector: nothing to check", kind)
				return
			}
			holder := func() (core.Holder, bool) {
				t.Helper()
				h, held, err := insp.Holder(bg())
				if err != nil {
					t.Fatalf("Holder: %v", err)
				}
				return h, held
			}
			if _, held := holder(); held {
				t.Fatal("Holder reports a holder of a lock nobody took")
			}
			h := mustTry(t, lockers[kind](s.p1))
			who, held := holder()
			switch {
			case !held:
				t.Fatal("Holder reports a held lock free")
			case who.Token != h.FencingToken():
				t.Fatalf("Holder token %d, the holder's handle has %d", who.Token, h.FencingToken())
			case who.ID == "":
				t.Fatal("Holder reports an empty identity")
			}
			mustRelease(t, h)
			if _, held := holder(); held {
				t.Fatal("Holder reports a holder after the release")
			}
		})
	}
	if _, ok := s.p1.RWMutex(s.name("inspect-rw")).RLocker().(core.Inspector); ok {
		t.Error("the read side of an RWMutex implements core.Inspector; it has many holders")
	}
}
