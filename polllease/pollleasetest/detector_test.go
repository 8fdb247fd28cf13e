package pollleasetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/polllease/pollleasetest"
)

func TestDetector(t *testing.T) {
	d := pollleasetest.NewDetector()
	a := d.PollFunc("a", pollleasetest.Sleep(time.Millisecond))
	b := d.PollFunc("b", nil)
	ctx := context.Background()
	_ = a(ctx, "t1", 2)
	_ = b(ctx, "t1", 3) // one after the other, higher token: fine
	if v := d.Violations(); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	started, release := make(chan struct{}), make(chan struct{})
	slow := d.PollFunc("a", func(context.Context, string, uint64) error {
		close(started)
		<-release
		return nil
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = slow(ctx, "t2", 5) }()
	<-started
	_ = b(ctx, "t2", 4) // while a polls t2, with a lower token
	close(release)
	wg.Wait()
	pollleasetest.WaitFor(t, "four polls", time.Second, func() bool { return len(d.Polls()) == 4 })
	if v := d.Violations(); len(v) != 2 {
		t.Fatalf("violations %v, want an overlap and a token regression", v)
	}
	if n := len(d.EndedSince(time.Time{})); n != 4 {
		t.Fatalf("%d polls recorded, want 4", n)
	}
}
