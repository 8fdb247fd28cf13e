package kit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
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

// TestHandleTrustWindowByClock: when the clock passes the end of the trust
// window while no timer has fired (a process resumed after SIGSTOP), the
// handle's context ends with ErrLockLost at its first Err or Done, its
// children with it, and core.HeldAt reads the lock as lost.
func TestHandleTrustWindowByClock(t *testing.T) {
	for _, probe := range []struct {
		name string
		done func(context.Context) bool
	}{
		{"Err", func(ctx context.Context) bool { return ctx.Err() != nil }},
		{"Done", func(ctx context.Context) bool {
			select {
			case <-ctx.Done():
				return true
			default:
				return false
			}
		}},
	} {
		t.Run(probe.name, func(t *testing.T) {
			clock := locktest.NewFakeClock()
			k := newKeeper(t, kit.KeeperConfig{
				TTL:    time.Second,
				Margin: 100 * time.Millisecond,
				Clock:  clock,
				Renew:  func(_ context.Context, b []*kit.Lease) []error { return make([]error, len(b)) },
			})
			h := kit.NewHandle(1, noopRelease)
			k.Keep(h, clock.Now(), nil)
			clock.Waiting(t) // the Keeper sleeps until the first renewal: the process freezes now
			child, cancel := context.WithCancel(h.Context())
			defer cancel()

			clock.Jump(899 * time.Millisecond)
			if probe.done(h.Context()) || !core.HeldAt(h, clock.Now()) {
				t.Fatalf("lost inside the trust window: %v", context.Cause(h.Context()))
			}
			clock.Jump(time.Millisecond) // the window ends at start + TTL − margin
			if core.HeldAt(h, clock.Now()) {
				t.Fatal("HeldAt reports the lock held after its trust window closed")
			}
			if !probe.done(h.Context()) {
				t.Fatalf("%s reports the context live after its trust window closed", probe.name)
			}
			if h.Context().Err() == nil {
				t.Fatal("Err is nil while Done is closed")
			}
			cause := context.Cause(h.Context())
			if !errors.Is(cause, core.ErrLockLost) || !strings.Contains(cause.Error(), "trust window closed") {
				t.Fatalf("cause = %v, want ErrLockLost for a closed trust window", cause)
			}
			if child.Err() == nil {
				t.Fatal("a child of the handle's context outlived it")
			}
			born, cancelBorn := context.WithCancel(h.Context())
			defer cancelBorn()
			if born.Err() == nil {
				t.Fatal("a child made after the loss is live")
			}
		})
	}
}

// TestHandleRenewalMovesWindow: a renewal moves the end of the window the
// handle's context checks.
func TestHandleRenewalMovesWindow(t *testing.T) {
	clock := locktest.NewFakeClock()
	k := newKeeper(t, kit.KeeperConfig{
		TTL:   time.Second,
		Clock: clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error { return make([]error, len(b)) },
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, clock.Now(), nil)
	tick(t, clock, h, time.Second/3) // renewed: the window now ends at 4/3 s
	clock.Waiting(t)                 // the Keeper sleeps until the next renewal: the process freezes now
	clock.Jump(900 * time.Millisecond)
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost inside the renewed window: %v", context.Cause(h.Context()))
	}
	clock.Jump(100 * time.Millisecond)
	if h.Context().Err() == nil {
		t.Fatal("live after the renewed window closed")
	}
}
