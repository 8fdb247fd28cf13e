package locktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

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
