package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// AcquireAsync starts l.Acquire(ctx) on a goroutine and returns channels
// for its outcome: the handle, or the error. Exactly one of them receives.
func AcquireAsync(ctx context.Context, l core.Locker) (<-chan core.Handle, <-chan error) {
	got, errc := make(chan core.Handle, 1), make(chan error, 1)
	go func() {
		h, err := l.Acquire(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- h
	}()
	return got, errc
}

// Receive returns the handle of an Acquire started by AcquireAsync. It
// fails the test when the Acquire failed or has not returned within 10 s.
func Receive(t testing.TB, got <-chan core.Handle, errc <-chan error) core.Handle {
	t.Helper()
	select {
	case h := <-got:
		return h
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock")
	}
	return nil
}

// RequireKept waits 1.5 × ttl and fails the test unless h is still held:
// its context alive, its lease renewed at least once and without error
// when h reports its lease (core.LeaseReporter), and other, a Locker of
// the same lock on another Provider, still unable to take it.
func RequireKept(t testing.TB, h core.Handle, ttl time.Duration, other core.Locker) {
	t.Helper()
	time.Sleep(ttl + ttl/2)
	if err := context.Cause(h.Context()); err != nil {
		t.Fatalf("the lease was not renewed: %v", err)
	}
	if lr, ok := h.(core.LeaseReporter); ok {
		if st, kept := lr.Lease(); kept && (st.Err != nil || st.Renewals == 0) {
			t.Fatalf("lease state %+v: want renewals and no error", st)
		}
	}
	if oh, err := other.TryAcquire(context.Background()); err == nil {
		_ = oh.Release(context.Background())
		t.Fatal("another Provider took the lock from a kept handle")
	} else if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire of another Provider: %v", err)
	}
}
