package kit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

func TestWrap(t *testing.T) {
	if err := kit.Wrap("mem", "acquire", "a", nil); err != nil {
		t.Fatalf("Wrap(nil) = %v", err)
	}
	cause := kit.Busy("held by %s", "x")
	err := kit.Wrap("mem", "acquire", "a", cause)
	var named *core.Error
	if !errors.As(err, &named) || named.Backend != "mem" || named.Op != "acquire" || named.Name != "a" {
		t.Fatalf("Wrap = %#v, want a *core.Error naming mem/acquire/a", err)
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("Wrap lost the sentinel: %v", err)
	}
	if again := kit.Wrap("other", "release", "b", err); again != err {
		t.Fatalf("Wrap of a *core.Error = %v, want it unchanged", again)
	}
}

func TestNotAcquiredKeepsContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := kit.NotAcquired(ctx)
	if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("NotAcquired = %v, want both ErrNotAcquired and context.Canceled", err)
	}
}
