package locktest

import (
	"context"
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
