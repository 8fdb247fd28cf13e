package kit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

func TestHandleRelease(t *testing.T) {
	calls := 0
	h := kit.NewHandle(7, func(context.Context) error { calls++; return errors.New("boom") })
	if h.FencingToken() != 7 {
		t.Fatalf("token = %d", h.FencingToken())
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("fresh context done: %v", err)
	}
	if err := h.Release(context.Background()); err == nil || err.Error() != "boom" {
		t.Fatalf("first Release = %v, want the backend's error", err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if calls != 1 {
		t.Fatalf("backend release called %d times", calls)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrReleased) {
		t.Fatalf("cause = %v", cause)
	}
	h.Lose(errors.New("late"))
	if cause := context.Cause(h.Context()); errors.Is(cause, core.ErrLockLost) {
		t.Fatal("Lose after Release changed the cause")
	}
}

func TestHandleLose(t *testing.T) {
	h := kit.NewHandle(1, func(context.Context) error { return nil })
	why := errors.New("key taken")
	h.Lose(why)
	cause := context.Cause(h.Context())
	if !errors.Is(cause, core.ErrLockLost) || !errors.Is(cause, why) {
		t.Fatalf("cause = %v, want ErrLockLost wrapping the reason", cause)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("Release after Lose changed the cause to %v", cause)
	}
}

func TestHandleLeaseChangedOnLose(t *testing.T) {
	h := kit.NewHandle(1, func(context.Context) error { return nil })
	if _, ok := h.Lease(); ok {
		t.Fatal("a handle no Keeper keeps reports a lease")
	}
	changed := h.LeaseChanged()
	if changed != h.LeaseChanged() {
		t.Fatal("two calls without a change in between returned different channels")
	}
	select {
	case <-changed:
		t.Fatal("closed before any change")
	default:
	}
	h.Lose(errors.New("key taken"))
	select {
	case <-changed:
	default:
		t.Fatal("Lose did not close the LeaseChanged channel")
	}
	select {
	case <-h.LeaseChanged():
	default:
		t.Fatal("LeaseChanged after the loss is not closed")
	}
	h.Lose(errors.New("again")) // harmless
}
