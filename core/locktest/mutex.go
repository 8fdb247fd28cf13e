package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

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
	h, err := l(t, 1, name).Acquire(ctx)
	if err == nil {
		_ = h.Release(bg())
		t.Fatal("Acquire succeeded on a held lock")
	}
	if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one matching ErrNotAcquired and context.DeadlineExceeded", err)
	}
	// How promptly it returns is the Deadline case's to judge: it compares
	// medians with a busy attempt's time measured in the same run, which
	// one try against a fixed bound cannot do on a loaded machine.
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
