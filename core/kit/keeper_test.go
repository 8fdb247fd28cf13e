package kit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

func newKeeper(t *testing.T, cfg kit.KeeperConfig) *kit.Keeper {
	t.Helper()
	k, err := kit.NewKeeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func noopRelease(context.Context) error { return nil }

// tick advances clock by d and waits for the Keeper's reaction: a renewal
// of h reported, or h lost. Each d must make h due, or nothing happens.
func tick(t *testing.T, clock *locktest.FakeClock, h *kit.BaseHandle, d time.Duration) {
	t.Helper()
	changed := h.LeaseChanged()
	clock.Advance(d)
	waitFor(t, changed, "renewal or loss after the clock moved")
}

// failing is a Renew that fails every lease with err and counts its calls.
func failing(err error, calls *atomic.Int32) func(context.Context, []*kit.Lease) []error {
	return func(_ context.Context, b []*kit.Lease) []error {
		calls.Add(1)
		errs := make([]error, len(b))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
}

// renewAllLost is a Renew that finds every lease gone.
var renewAllLost = failing(core.ErrLockLost, new(atomic.Int32))

func TestKeeperConfigErrors(t *testing.T) {
	renew := func(context.Context, []*kit.Lease) []error { return nil }
	for _, cfg := range []kit.KeeperConfig{
		{TTL: time.Second},
		{TTL: -time.Second, Renew: renew},
		{TTL: time.Second, Interval: time.Second, Renew: renew},
		{TTL: time.Second, Margin: 2 * time.Second, Renew: renew},
		{Renew: renew},
	} {
		if _, err := kit.NewKeeper(cfg); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("NewKeeper(%+v) = %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

func TestKeeperBatchesRenewals(t *testing.T) {
	clock := locktest.NewFakeClock()
	var mu sync.Mutex
	var batches []int
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      300 * time.Millisecond,
		Interval: 50 * time.Millisecond,
		Clock:    clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			mu.Lock()
			batches = append(batches, len(b))
			mu.Unlock()
			return make([]error, len(b))
		},
	})
	var hs []*kit.BaseHandle
	start := clock.Now()
	for i := range 100 {
		h := kit.NewHandle(uint64(i+1), noopRelease)
		k.Keep(h, start, i)
		hs = append(hs, h)
	}
	const rounds = 8 // 400ms, more than the TTL: only renewals keep them
	for range rounds {
		tick(t, clock, hs[len(hs)-1], 50*time.Millisecond)
	}
	for _, h := range hs {
		if h.Context().Err() != nil {
			t.Fatalf("handle lost although every renewal succeeded: %v", context.Cause(h.Context()))
		}
	}
	mu.Lock()
	got := slices.Clone(batches)
	mu.Unlock()
	if len(got) != rounds || slices.ContainsFunc(got, func(n int) bool { return n != 100 }) {
		t.Fatalf("batches %v, want %d batches of all 100 leases", got, rounds)
	}
	for _, h := range hs {
		_ = h.Release(context.Background())
	}
	if k.Len() != 0 {
		t.Fatalf("Len = %d after releasing everything", k.Len())
	}
}

// TestKeeperLostVerdict: a renewal that finds the lease gone ends the
// context with ErrLockLost, which also wakes a LeaseChanged watcher, without
// setting the state's Err.
func TestKeeperLostVerdict(t *testing.T) {
	clock := locktest.NewFakeClock()
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Minute,
		Interval: 10 * time.Millisecond,
		Clock:    clock,
		Renew:    renewAllLost,
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, clock.Now(), nil)
	tick(t, clock, h, 10*time.Millisecond)
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(h.Context()))
	}
	if s, _ := h.Lease(); s.Err != nil || s.Renewals != 0 {
		t.Fatalf("state after the loss = %+v; the context reports a loss, not Err", s)
	}
}

// TestKeeperTrustWindow: renewals that fail with an unknown outcome are
// retried every Interval/4 (at least 10ms) until the trust window closes,
// at start + TTL − margin and not before.
func TestKeeperTrustWindow(t *testing.T) {
	clock := locktest.NewFakeClock()
	outage := errors.New("connection refused")
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      200 * time.Millisecond,
		Interval: 40 * time.Millisecond,
		Margin:   20 * time.Millisecond,
		Clock:    clock,
		Renew:    failing(outage, &calls),
	})
	start := clock.Now()
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, start, nil)
	tick(t, clock, h, 40*time.Millisecond) // the first renewal
	ticks := 1
	done := h.Context().Done()
	for open := true; open; {
		tick(t, clock, h, 10*time.Millisecond) // each retry
		ticks++
		select {
		case <-done:
			open = false
		default:
		}
	}
	cause := context.Cause(h.Context())
	if !errors.Is(cause, core.ErrLockLost) || !errors.Is(cause, outage) {
		t.Fatalf("cause = %v, want ErrLockLost wrapping the renewal error", cause)
	}
	if took := clock.Now().Sub(start); took != 180*time.Millisecond {
		t.Fatalf("lost at start + %v, want when the trust window closes (start + TTL − margin = 180ms)", took)
	}
	if n := int(calls.Load()); n != ticks-1 {
		t.Fatalf("%d renewal attempts in %d ticks, want one a tick until the last, which finds the window closed", n, ticks)
	}
}

func TestKeeperReleaseStopsRenewal(t *testing.T) {
	clock := locktest.NewFakeClock()
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Minute,
		Interval: 10 * time.Millisecond,
		Clock:    clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			calls.Add(1)
			return make([]error, len(b))
		},
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, clock.Now(), nil)
	_ = h.Release(context.Background())
	if k.Len() != 0 {
		t.Fatal("lease still kept after Release")
	}
	clock.Advance(50 * time.Millisecond)
	if calls.Load() != 0 {
		t.Fatal("a released lease was renewed")
	}
	if !errors.Is(context.Cause(h.Context()), core.ErrReleased) {
		t.Fatalf("cause = %v", context.Cause(h.Context()))
	}
}

func TestKeeperClose(t *testing.T) {
	k, err := kit.NewKeeper(kit.KeeperConfig{
		TTL:   time.Minute,
		Renew: func(_ context.Context, b []*kit.Lease) []error { return make([]error, len(b)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, time.Now(), nil)
	k.Close()
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause after Close = %v", context.Cause(h.Context()))
	}
	h2 := kit.NewHandle(2, noopRelease)
	k.Keep(h2, time.Now(), nil)
	if h2.Context().Err() == nil {
		t.Fatal("Keep after Close did not mark the handle lost")
	}
}

// TestKeeperLosesWhenRenewHangs: a renewal that ignores its context does
// not keep the lease past its trust window: the Keeper judges it
// unanswered when its clock reaches the window's end.
func TestKeeperLosesWhenRenewHangs(t *testing.T) {
	clock := locktest.NewFakeClock()
	release := make(chan struct{})
	called := make(chan struct{})
	var once sync.Once
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      200 * time.Millisecond,
		Interval: 40 * time.Millisecond,
		Margin:   20 * time.Millisecond,
		Clock:    clock,
		// A renewal that ignores its context, as a driver without context
		// deadlines does against a frozen server.
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			once.Do(func() { close(called) })
			<-release
			return make([]error, len(b))
		},
	})
	defer close(release)
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, clock.Now(), nil)
	// Done is read once, so that the handle's own check of the window
	// cannot end the context: the Keeper must.
	done := h.Context().Done()
	clock.Advance(40 * time.Millisecond)
	waitFor(t, called, "renewal")
	clock.Advance(140 * time.Millisecond)
	waitFor(t, done, "loss: a hanging renewal kept the lease trusted past its window")
	cause := context.Cause(h.Context())
	if !errors.Is(cause, core.ErrLockLost) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("cause = %v, want ErrLockLost for a renewal that did not answer in time", cause)
	}
}

// TestKeeperRetriesWithoutSpinning: a renewal that fails fast is retried
// once per Interval/4, not in a loop.
func TestKeeperRetriesWithoutSpinning(t *testing.T) {
	clock := locktest.NewFakeClock()
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Second,
		Interval: 200 * time.Millisecond,
		Clock:    clock,
		Renew:    failing(errors.New("connection refused"), &calls),
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, clock.Now(), nil)
	tick(t, clock, h, 200*time.Millisecond)
	for i := int32(1); i <= 5; i++ {
		if n := calls.Load(); n != i {
			t.Fatalf("%d renewal calls after %d due times: the retry spins", n, i)
		}
		tick(t, clock, h, 50*time.Millisecond)
	}
}

// TestKeeperReportsLeaseState follows one handle's LeaseState through a
// success, a failed renewal, a recovery and the release.
func TestKeeperReportsLeaseState(t *testing.T) {
	clock := locktest.NewFakeClock()
	outage := errors.New("connection refused")
	var fail atomic.Bool
	const ttl, margin, interval = 600 * time.Millisecond, 60 * time.Millisecond, 50 * time.Millisecond
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      ttl,
		Interval: interval,
		Margin:   margin,
		Clock:    clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			errs := make([]error, len(b))
			if fail.Load() {
				for i := range errs {
					errs[i] = outage
				}
			}
			return errs
		},
	})
	h := kit.NewHandle(1, noopRelease)
	if _, ok := h.Lease(); ok {
		t.Fatal("Lease reports a state before any Keeper keeps the handle")
	}
	var _ core.LeaseReporter = h

	start := clock.Now()
	k.Keep(h, start, nil)
	s, ok := h.Lease()
	if !ok || !s.Renewed.Equal(start) || !s.Deadline.Equal(start.Add(ttl-margin)) || s.Renewals != 0 || s.Err != nil {
		t.Fatalf("state after Keep = %+v, %v; want Renewed = start, Deadline = start + TTL − margin", s, ok)
	}

	tick(t, clock, h, interval)
	tick(t, clock, h, interval)
	s, _ = h.Lease()
	if s.Renewals != 2 || !s.Renewed.Equal(start.Add(2*interval)) || !s.Deadline.Equal(s.Renewed.Add(ttl-margin)) || s.Err != nil {
		t.Fatalf("state after two renewals = %+v", s)
	}

	fail.Store(true)
	tick(t, clock, h, interval)
	bad, _ := h.Lease()
	if !errors.Is(bad.Err, outage) {
		t.Fatalf("Err = %v, want the renewal's error", bad.Err)
	}
	if !bad.Renewed.Equal(s.Renewed) || !bad.Deadline.Equal(s.Deadline) {
		t.Fatalf("a failed renewal moved the trust window: %+v after %+v", bad, s)
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost on the first failed renewal, inside the trust window: %v", context.Cause(h.Context()))
	}

	fail.Store(false)
	tick(t, clock, h, interval)
	good, _ := h.Lease()
	if good.Err != nil || good.Renewals != bad.Renewals+1 || !good.Renewed.After(bad.Renewed) {
		t.Fatalf("state after recovery = %+v, before %+v", good, bad)
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost although a renewal succeeded in time: %v", context.Cause(h.Context()))
	}

	changed := h.LeaseChanged()
	_ = h.Release(context.Background())
	select {
	case <-changed:
	default:
		t.Fatal("Release did not close the LeaseChanged channel")
	}
	select {
	case <-h.LeaseChanged():
	default:
		t.Fatal("LeaseChanged after Release is not closed")
	}
	if s, ok := h.Lease(); !ok || s.Renewals != good.Renewals {
		t.Fatalf("Lease after Release = %+v, %v; want the last state", s, ok)
	}
}

// TestKeeperJudgesEachLeaseByItsOwnWindow: a batch holds a lease near the
// end of its window and one far from it, and the renewal is slow. The
// first is lost when its window closes; the second is not failed with it,
// and the answer that comes later renews it.
func TestKeeperJudgesEachLeaseByItsOwnWindow(t *testing.T) {
	clock := locktest.NewFakeClock()
	called := make(chan []*kit.Lease, 1)
	answer := make(chan []error, 1)
	stop := make(chan struct{})
	const ttl, margin, interval = 14 * time.Second, 1400 * time.Millisecond, 10 * time.Second
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      ttl,
		Interval: interval,
		Margin:   margin,
		Clock:    clock,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			called <- b
			select {
			case errs := <-answer:
				return errs
			case <-stop:
				return make([]error, len(b))
			}
		},
	})
	t.Cleanup(func() { close(stop) }) // before the Keeper's Close
	t0 := clock.Now()
	// Both fall due at t0 + 10 s, and neither earlier: near is kept at t0
	// (its window closes at t0 + 12.6 s), far at t0 + 4 s (closing at
	// t0 + 16.6 s). However the Keeper's goroutine is scheduled, it sees
	// nothing due before the clock reaches t0 + 10 s.
	near, far := kit.NewHandle(1, noopRelease), kit.NewHandle(2, noopRelease)
	k.Keep(near, t0, "near")
	clock.Advance(4 * time.Second)
	k.Keep(far, clock.Now(), "far")
	nearDone := near.Context().Done() // read once: the Keeper must end it
	clock.Advance(interval - 4*time.Second)
	select {
	case b := <-called:
		if len(b) != 2 {
			t.Fatalf("batch of %d leases, want both", len(b))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal")
	}
	farChanged := far.LeaseChanged()

	clock.Advance(ttl - margin - interval) // near's window closes
	waitFor(t, nearDone, "near lost when its window closed, the renewal still running")
	if cause := context.Cause(near.Context()); !errors.Is(cause, core.ErrLockLost) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("near's cause = %v, want ErrLockLost for a renewal that did not answer in time", cause)
	}
	if s, _ := far.Lease(); s.Err != nil || far.Context().Err() != nil {
		t.Fatalf("far failed with near: state %+v, cause %v", s, context.Cause(far.Context()))
	}

	answer <- []error{nil, nil}
	waitFor(t, farChanged, "far's renewal recorded")
	s, _ := far.Lease()
	if s.Err != nil || s.Renewals != 1 || !s.Renewed.Equal(t0.Add(interval)) || !s.Deadline.Equal(s.Renewed.Add(ttl-margin)) {
		t.Fatalf("far after the slow answer: %+v, want renewed at the batch's start", s)
	}
	if err := far.Context().Err(); err != nil {
		t.Fatalf("far lost: %v", context.Cause(far.Context()))
	}
	if !errors.Is(context.Cause(near.Context()), core.ErrLockLost) {
		t.Fatal("the late answer revived near")
	}
}
