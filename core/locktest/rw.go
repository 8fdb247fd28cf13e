package locktest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

var rwCases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"ReadersShareWriterExcludes", testRWShare},
	{"WriterPreference", testRWWriterPreference},
	{"ReadersAndWritersNeverOverlap", testRWNoOverlap},
	{"FencingAcrossReadsAndWrites", testRWFencing},
}

func testRWShare(t *testing.T, s *suite) {
	name := s.name("share")
	rw1, rw2 := s.p1.RWMutex(name), s.p2.RWMutex(name)
	if rw1.RLocker().Name() != name {
		t.Fatalf("RLocker().Name() = %q, want %q", rw1.RLocker().Name(), name)
	}
	r1 := mustTry(t, rw1.RLocker())
	r2 := mustTry(t, rw2.RLocker())
	r3 := mustTry(t, rw1.RLocker()) // the same Locker value may hold two reads
	mustBusy(t, rw2)
	mustRelease(t, r1)
	mustRelease(t, r2)
	mustBusy(t, rw1)
	mustRelease(t, r3)
	w := mustTry(t, rw2)
	mustBusy(t, rw1.RLocker())
	mustBusy(t, rw1)
	mustRelease(t, w)
	mustRelease(t, mustTry(t, rw1.RLocker()))
}

func testRWWriterPreference(t *testing.T, s *suite) {
	name := s.name("writerpref")
	rw1, rw2 := s.p1.RWMutex(name), s.p2.RWMutex(name)
	r := mustTry(t, rw1.RLocker())

	got := make(chan core.Handle, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
		defer cancel()
		h, err := rw2.Acquire(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- h
	}()

	// Once the writer is waiting, new readers must be refused.
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := rw1.RLocker().TryAcquire(bg())
		if err != nil {
			if !errors.Is(err, core.ErrNotAcquired) {
				t.Fatal(err)
			}
			break
		}
		_ = h.Release(bg())
		if time.Now().After(deadline) {
			t.Fatal("readers are still admitted 10s after a writer started waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustRelease(t, r)
	select {
	case h := <-got:
		mustBusy(t, rw1.RLocker())
		mustRelease(t, h)
	case err := <-errc:
		t.Fatalf("writer: %v", err)
	}
	mustRelease(t, mustTry(t, rw1.RLocker()))
}

func testRWNoOverlap(t *testing.T, s *suite) {
	name := s.name("overlap")
	lockers := []core.RWLocker{s.p1.RWMutex(name), s.p2.RWMutex(name)}
	var readers, writers atomic.Int32
	var bad atomic.Bool
	write := func(i int) bool { return i%4 == 0 }
	hammer(t, 40, func(i int) core.Locker {
		if write(i) {
			return lockers[i%2]
		}
		return lockers[i%2].RLocker()
	}, func(i int) {
		if write(i) {
			if writers.Add(1) != 1 || readers.Load() != 0 {
				bad.Store(true)
			}
			time.Sleep(time.Millisecond)
			writers.Add(-1)
			return
		}
		readers.Add(1)
		if writers.Load() != 0 {
			bad.Store(true)
		}
		time.Sleep(2 * time.Millisecond)
		readers.Add(-1)
	})
	if bad.Load() {
		t.Fatal("a writer overlapped another holder")
	}
}

func testRWFencing(t *testing.T, s *suite) {
	name := s.name("fence")
	rw := s.p1.RWMutex(name)
	var last uint64
	check := func(h core.Handle) {
		t.Helper()
		if h.FencingToken() <= last {
			t.Fatalf("token %d ≤ previous %d", h.FencingToken(), last)
		}
		last = h.FencingToken()
	}
	r1 := mustTry(t, rw.RLocker())
	check(r1)
	r2 := mustTry(t, s.p2.RWMutex(name).RLocker())
	check(r2)
	mustRelease(t, r1)
	mustRelease(t, r2)
	w := mustTry(t, rw)
	check(w)
	mustRelease(t, w)
	r3 := mustTry(t, rw.RLocker())
	check(r3)
	mustRelease(t, r3)
}
