package locktest

import (
	"testing"

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
