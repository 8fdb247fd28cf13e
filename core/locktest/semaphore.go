package locktest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

var semCases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"ReachesMax", testSemReachesMax},
	{"NeverExceedsMax", testSemNeverExceeds},
	{"InvalidMax", testSemInvalidMax},
	{"FencingAcrossSlots", testSemFencing},
}

func testSemReachesMax(t *testing.T, s *suite) {
	name := s.name("reach")
	var hs []core.Handle
	for i := range 3 {
		p := s.p1
		if i%2 == 1 {
			p = s.p2
		}
		hs = append(hs, mustTry(t, p.Semaphore(name, 3)))
	}
	mustBusy(t, s.p1.Semaphore(name, 3))
	mustRelease(t, hs[1])
	mustTry(t, s.p2.Semaphore(name, 3))
	mustBusy(t, s.p1.Semaphore(name, 3))
}

func testSemNeverExceeds(t *testing.T, s *suite) {
	name := s.name("exceed")
	const max = 3
	var inside, peak atomic.Int32
	hammer(t, 30, func(i int) core.Locker {
		if i%2 == 1 {
			return s.p2.Semaphore(name, max)
		}
		return s.p1.Semaphore(name, max)
	}, func(int) {
		raise(&peak, inside.Add(1))
		time.Sleep(2 * time.Millisecond)
		inside.Add(-1)
	})
	if peak.Load() > max {
		t.Fatalf("%d holders at once, max is %d", peak.Load(), max)
	}
}

func testSemInvalidMax(t *testing.T, s *suite) {
	for _, max := range []int{0, -1} {
		l := s.p1.Semaphore(s.name("invalid"), max)
		for _, f := range []func(context.Context) (core.Handle, error){l.TryAcquire, l.Acquire} {
			h, err := f(bg())
			if err == nil {
				_ = h.Release(bg())
				t.Fatalf("max %d: acquire succeeded", max)
			}
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("max %d: %v, want ErrInvalidArgument", max, err)
			}
		}
	}
}

func testSemFencing(t *testing.T, s *suite) {
	name := s.name("fence")
	var last uint64
	var hs []core.Handle
	for i := range 4 {
		h := mustTry(t, s.p1.Semaphore(name, 4))
		if h.FencingToken() <= last {
			t.Fatalf("slot grant %d: token %d ≤ previous %d", i, h.FencingToken(), last)
		}
		last = h.FencingToken()
		hs = append(hs, h)
	}
	mustRelease(t, hs[2])
	h := mustTry(t, s.p2.Semaphore(name, 4))
	if h.FencingToken() <= last {
		t.Fatalf("token %d after a slot was freed ≤ previous %d", h.FencingToken(), last)
	}
}
