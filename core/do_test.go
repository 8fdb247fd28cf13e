package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/memlock"
)

// newLocks returns an in-memory Provider, closed with the test.
func newLocks(t *testing.T) *memlock.Provider {
	t.Helper()
	p, err := memlock.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestDo(t *testing.T) {
	l := newLocks(t).Mutex("do")
	want := errors.New("work failed")
	err := core.Do(context.Background(), l, func(ctx context.Context) error {
		if _, err := l.TryAcquire(ctx); !errors.Is(err, core.ErrNotAcquired) {
			t.Errorf("lock not held inside Do: %v", err)
		}
		return want
	})
	if !errors.Is(err, want) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	h, err := l.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("lock still held after Do: %v", err)
	}
	_ = h.Release(context.Background())
}

func TestDoContextEndsWithLock(t *testing.T) {
	l := newLocks(t).Mutex("do")
	var inner context.Context
	_ = core.Do(context.Background(), l, func(ctx context.Context) error {
		inner = ctx
		return nil
	})
	if inner.Err() == nil {
		t.Fatal("fn's context still live after Do returned")
	}
}

func TestAcquireAll(t *testing.T) {
	locks := newLocks(t)
	a, b := locks.Mutex("a"), locks.Mutex("b")
	h, err := core.AcquireAll(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(context.Background()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatal("b not held")
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range []core.Locker{a, b} {
		h, err := l.TryAcquire(context.Background())
		if err != nil {
			t.Fatalf("%s still held after Release: %v", l.Name(), err)
		}
		_ = h.Release(context.Background())
	}
}

func TestAcquireAllRollsBack(t *testing.T) {
	locks := newLocks(t)
	a, b := locks.Mutex("a"), locks.Mutex("b")
	hb, _ := b.TryAcquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := core.AcquireAll(ctx, a, b); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("err = %v", err)
	}
	_ = hb.Release(context.Background())
	h, err := a.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("a left held after a failed AcquireAll: %v", err)
	}
	_ = h.Release(context.Background())
	if _, err := core.AcquireAll(context.Background()); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("AcquireAll() = %v", err)
	}
}

func TestAcquireAllMemberLost(t *testing.T) {
	locks := newLocks(t)
	a, b := locks.Mutex("a"), locks.Mutex("b")
	h, err := core.AcquireAll(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	locks.Break("b")
	<-h.Context().Done()
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(h.Context()))
	}
	_ = h.Release(context.Background())
}
