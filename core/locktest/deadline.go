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
	// deadlineSlack is the median overshoot the case allows: far above
	// what a backend that watches its deadline needs (a few ms), far
	// below the 100 ms of a timer or poll that does not.
	deadlineSlack = 50 * time.Millisecond
)

// testDeadline: an Acquire bounded by a context deadline, waiting behind a
// holder on another Provider, returns an error matching ErrNotAcquired and
// context.DeadlineExceeded promptly: the median overshoot of deadlineTries
// tries stays under deadlineSlack (a median, so that one try a loaded
// machine delays does not decide).
func testDeadline(t *testing.T, s *suite) {
	name := s.name("deadline")
	holder := mustTry(t, s.p1.Mutex(name))
	defer mustRelease(t, holder)
	waiter := s.p2.Mutex(name)
	over := make([]time.Duration, 0, deadlineTries)
	for range deadlineTries {
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
	t.Logf("overshoot past a %v deadline, %d tries: %v", deadlineWait, deadlineTries, over)
	if med := over[len(over)/2]; med > deadlineSlack {
		t.Fatalf("Acquire returns a median %v after its deadline (tries: %v), want at most %v", med, over, deadlineSlack)
	}
}
