package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// testHandoffAfterBreak: the lock is broken (Config.Break) while its holder
// has a waiter of the same Provider queued behind it, and another Provider
// takes it; then the old holder releases. A backend that hands a released
// lock to a local waiter must not hand this one on: the waiter is granted
// the lock only after the other Provider releases it, with a token larger
// than every token granted before. Backends without local handoff pass as
// they pass the other cases.
func testHandoffAfterBreak(t *testing.T, s *suite) {
	if s.cfg.Break == nil {
		t.Skip("Config.Break is nil: this backend has no way to break a lock from outside")
	}
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	name := s.name("handoff-break")
	h1 := mustAcquire(t, s.p1.Mutex(name))
	// The waiter lines up behind h1 while Break makes its round trips; the
	// outcome must hold whenever it does.
	got, errc := AcquireAsync(ctx, s.p1.Mutex(name))
	s.cfg.Break(t, h1)

	// The other Provider takes the broken lock, unless the waiter, which
	// may have found h1 lost, takes it first.
	other, oerrc := AcquireAsync(ctx, s.p2.Mutex(name))
	var first, second core.Handle
	var next <-chan core.Handle
	var nexterr <-chan error
	select {
	case first = <-other:
		next, nexterr = got, errc
	case first = <-got:
		next, nexterr = other, oerrc
	case err := <-oerrc:
		t.Fatalf("Acquire on another Provider after Break: %v", err)
	case err := <-errc:
		t.Fatalf("Acquire of the waiter: %v", err)
	}
	t.Cleanup(func() { _ = first.Release(bg()) })
	if first.FencingToken() <= h1.FencingToken() {
		t.Fatalf("token %d granted after the broken grant's %d", first.FencingToken(), h1.FencingToken())
	}

	_ = h1.Release(bg()) // a broken handle's release may report the loss
	select {
	case h := <-next:
		_ = h.Release(bg())
		t.Fatalf("granted token %d while token %d holds the lock: the broken grant was handed on",
			h.FencingToken(), first.FencingToken())
	default:
	}
	mustRelease(t, first)
	second = Receive(t, next, nexterr)
	t.Cleanup(func() { _ = second.Release(bg()) })
	if second.FencingToken() <= first.FencingToken() {
		t.Fatalf("token %d granted after token %d", second.FencingToken(), first.FencingToken())
	}
	mustRelease(t, second)
}
