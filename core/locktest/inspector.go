package locktest

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

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

// testVerify: a handle that implements core.Verifier and can ask its store
// (Verify does not fail with ErrUnsupported) reports held while it holds
// the lock, not held once the lock was broken behind it (Config.Break;
// within LostWithin, the store's answer where the backend has not noticed
// yet) and after its release. Every primitive's handles are asked.
func testVerify(t *testing.T, s *suite) {
	lockers := map[string]func(name string) core.Locker{
		"Mutex":     func(n string) core.Locker { return s.p1.Mutex(n) },
		"RWMutex":   func(n string) core.Locker { return s.p1.RWMutex(n) },
		"Read":      func(n string) core.Locker { return s.p1.RWMutex(n).RLocker() },
		"Semaphore": func(n string) core.Locker { return s.p1.Semaphore(n, 2) },
	}
	for _, kind := range []string{"Mutex", "RWMutex", "Read", "Semaphore"} {
		t.Run(kind, func(t *testing.T) {
			h, err := lockers[kind](s.name("verify-" + kind)).TryAcquire(bg())
			if errors.Is(err, core.ErrUnsupported) {
				t.Logf("%s: %v: nothing to check", kind, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			verify := func() bool {
				t.Helper()
				held, err := h.(core.Verifier).Verify(bg())
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return held
			}
			if v, ok := h.(core.Verifier); !ok || unsupported(v) {
				mustRelease(t, h)
				t.Logf("the %s handle cannot ask its store: nothing to check", kind)
				return
			}
			if !verify() {
				t.Fatal("Verify reports a held lock not held")
			}
			if s.cfg.Break != nil && kind == "Mutex" {
				s.cfg.Break(t, h)
				// The store may take a moment to drop the grant (a
				// terminated session exits asynchronously).
				deadline := time.Now().Add(s.cfg.lostWithin())
				for verify() {
					if time.Now().After(deadline) {
						t.Fatalf("Verify reports a broken lock held %v after the break", s.cfg.lostWithin())
					}
					time.Sleep(10 * time.Millisecond)
				}
				_ = h.Release(bg())
				return
			}
			mustRelease(t, h)
			if verify() {
				t.Fatal("Verify reports a released lock held")
			}
		})
	}
}

// unsupported reports whether v cannot ask its store.
func unsupported(v core.Verifier) bool {
	_, err := v.Verify(bg())
	return errors.Is(err, core.ErrUnsupported)
}
