package kit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

func TestBackoffDelay(t *testing.T) {
	b := kit.Backoff{Min: 4 * time.Millisecond, Max: 100 * time.Millisecond}
	for n := range 20 {
		d := b.Delay(n)
		want := min(4*time.Millisecond<<min(n, 10), 100*time.Millisecond)
		if d < want/2 || d > want {
			t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, want/2, want)
		}
	}
}

func TestBackoffQueued(t *testing.T) {
	for _, c := range []struct{ in, want kit.Backoff }{
		{kit.DefaultBackoff, kit.Backoff{Min: kit.QueuedPollMin, Max: kit.DefaultBackoff.Max}},
		{kit.Backoff{Min: time.Second, Max: 2 * time.Second}, kit.Backoff{Min: time.Second, Max: 2 * time.Second}},
		{kit.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}, kit.Backoff{Min: kit.QueuedPollMin, Max: kit.QueuedPollMin}},
	} {
		if got := c.in.Queued(); got != c.want {
			t.Errorf("%+v.Queued() = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestWaitWakesOnSignal(t *testing.T) {
	// The backoff would sleep an hour; only the wake signal can end the wait.
	slow := kit.Backoff{Min: time.Hour, Max: time.Hour}
	wake := make(chan struct{}, 1)
	tries := 0
	done := make(chan error, 1)
	go func() {
		_, err := kit.Wait(context.Background(), slow, wake, func(context.Context) (core.Handle, time.Duration, error) {
			tries++
			if tries == 2 {
				return kit.NewHandle(1, func(context.Context) error { return nil }), 0, nil
			}
			return nil, 0, kit.Busy("held")
		})
		done <- err
	}()
	wake <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not wake on the signal")
	}
}

func TestWaitHonoursRetryHint(t *testing.T) {
	slow := kit.Backoff{Min: time.Hour, Max: time.Hour}
	tries := 0
	_, err := kit.Wait(context.Background(), slow, nil, func(context.Context) (core.Handle, time.Duration, error) {
		tries++
		if tries == 3 {
			return kit.NewHandle(1, func(context.Context) error { return nil }), 0, nil
		}
		return nil, time.Millisecond, kit.Busy("held")
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWaitStops(t *testing.T) {
	hard := errors.New("server down")
	_, err := kit.Wait(context.Background(), kit.DefaultBackoff, nil, func(context.Context) (core.Handle, time.Duration, error) {
		return nil, 0, hard
	})
	if !errors.Is(err, hard) {
		t.Fatalf("err = %v, want the attempt's error", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = kit.Wait(ctx, kit.DefaultBackoff, nil, func(context.Context) (core.Handle, time.Duration, error) {
		return nil, 0, kit.Busy("held")
	})
	if !errors.Is(err, core.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
}

func TestNotifier(t *testing.T) {
	var n kit.Notifier
	var first, last []string
	n.OnFirst = func(k string) { first = append(first, k) }
	n.OnLast = func(k string) { last = append(last, k) }
	a, stopA := n.Subscribe("k")
	b, stopB := n.Subscribe("k")
	c, stopC := n.Subscribe("other")
	n.Notify("k")
	n.Notify("k") // coalesced, never blocks
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("subscriber of k not woken")
		}
	}
	select {
	case <-c:
		t.Fatal("subscriber of other woken by k")
	default:
	}
	stopA()
	stopA()
	stopB()
	stopC()
	if n.Len() != 0 {
		t.Fatalf("Len = %d after every unsubscribe", n.Len())
	}
	if len(first) != 2 || len(last) != 2 {
		t.Fatalf("OnFirst %v, OnLast %v: want one each per key", first, last)
	}
}
