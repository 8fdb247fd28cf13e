package kit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

func TestGatesOneAtATime(t *testing.T) {
	var g kit.Gates
	var inside, peak atomic.Int32
	done := make(chan struct{})
	for range 20 {
		go func() {
			defer func() { done <- struct{}{} }()
			leave, err := g.Enter(context.Background(), "k")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			if n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			leave()
			leave() // idempotent
		}()
	}
	for range 20 {
		<-done
	}
	if peak.Load() != 1 {
		t.Fatalf("%d callers inside one gate at once", peak.Load())
	}
	if g.Len() != 0 {
		t.Fatalf("Len = %d after everyone left", g.Len())
	}
}

func TestGatesCancel(t *testing.T) {
	var g kit.Gates
	leave, _ := g.Enter(context.Background(), "k")
	other, _ := g.Enter(context.Background(), "other") // independent key
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Enter(ctx, "k"); !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	leave()
	if g.Len() != 0 {
		t.Fatalf("Len = %d", g.Len())
	}
}
