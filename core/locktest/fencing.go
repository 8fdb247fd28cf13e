package locktest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

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
