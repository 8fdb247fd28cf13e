package locktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// deadlineTries and deadlineWait shape testDeadline: each try waits
// deadlineWait behind a holder on another Provider.
const (
	deadlineTries = 5
	deadlineWait  = 100 * time.Millisecond
	// deadlineSlack is the median overshoot the case allows beyond two
	// attempts' time: far above what a backend that watches its deadline
	// needs (a few ms), far below the 100 ms of a timer or poll that does
	// not.
	deadlineSlack = 50 * time.Millisecond
)

// testDeadline: an Acquire bounded by a context deadline, waiting behind a
// holder on another Provider, returns an error matching ErrNotAcquired and
// context.DeadlineExceeded promptly. An attempt in flight at the deadline
// may finish, and a failed one gives back what it may have been granted,
// so the bound is deadlineSlack plus twice a busy TryAcquire's time,
// measured in the same run, interleaved with the Acquires (a loaded
// machine slows both). Medians of deadlineTries, so that one try a loaded
// machine delays does not decide. A loaded moment can still stretch most
// of a round (the cancellation takes more wake-ups than a TryAcquire), so
// the case fails only when deadlineRounds rounds in a row miss the bound:
// a backend that does not watch its deadline misses it every time.
func testDeadline(t *testing.T, s *suite) {
	name := s.name("deadline")
	holder := mustTry(t, s.p1.Mutex(name))
	defer mustRelease(t, holder)
	waiter := s.p2.Mutex(name)
	for round := 1; ; round++ {
		over, tries := deadlineRound(t, waiter)
		bound := deadlineSlack + 2*tries[len(tries)/2]
		t.Logf("overshoot past a %v deadline, %d tries: %v; a busy TryAcquire: %v", deadlineWait, deadlineTries, over, tries)
		med := over[len(over)/2]
		if med <= bound {
			return
		}
		if round == deadlineRounds {
			t.Fatalf("Acquire returns a median %v after its deadline (tries: %v), want at most %v (%v + 2 × a busy TryAcquire's median), in each of %d rounds", med, over, bound, deadlineSlack, deadlineRounds)
		}
	}
}

// deadlineRounds is how many rounds of testDeadline may miss the bound in
// a row before the case fails.
const deadlineRounds = 3

// deadlineRound times deadlineTries Acquires of waiter bounded by a
// deadline, each after a busy TryAcquire, and returns how far past its
// deadline each Acquire returned and how long each TryAcquire took, both
// sorted.
func deadlineRound(t *testing.T, waiter core.Locker) (over, tries []time.Duration) {
	t.Helper()
	over = make([]time.Duration, 0, deadlineTries)
	tries = make([]time.Duration, 0, deadlineTries)
	for range deadlineTries {
		tries = append(tries, busyTry(t, waiter))
		ctx, cancel := context.WithTimeout(bg(), deadlineWait)
		dl, _ := ctx.Deadline()
		h, err := waiter.Acquire(ctx)
		returned := time.Now()
		cancel()
		if err == nil {
			_ = h.Release(bg())
			t.Fatal("Acquire got a lock another Provider holds")
		}
		if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want one matching ErrNotAcquired and context.DeadlineExceeded", err)
		}
		over = append(over, returned.Sub(dl))
	}
	slices.Sort(over)
	slices.Sort(tries)
	return over, tries
}

// busyTry times one TryAcquire of l, which another Provider holds.
func busyTry(t *testing.T, l core.Locker) time.Duration {
	t.Helper()
	start := time.Now()
	h, err := l.TryAcquire(bg())
	took := time.Since(start)
	if err == nil {
		_ = h.Release(bg())
		t.Fatal("TryAcquire got a lock another Provider holds")
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v, want an error matching ErrNotAcquired", err)
	}
	return took
}
