package kit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
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

// renewAllLost is a Renew that finds every lease gone.
func renewAllLost(_ context.Context, b []*kit.Lease) []error {
	errs := make([]error, len(b))
	for i := range errs {
		errs[i] = core.ErrLockLost
	}
	return errs
}

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
	var mu sync.Mutex
	var batches []int
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      300 * time.Millisecond,
		Interval: 50 * time.Millisecond,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			mu.Lock()
			batches = append(batches, len(b))
			mu.Unlock()
			return make([]error, len(b))
		},
	})
	var hs []*kit.BaseHandle
	start := time.Now()
	for i := range 100 {
		h := kit.NewHandle(uint64(i+1), noopRelease)
		k.Keep(h, start, i)
		hs = append(hs, h)
	}
	time.Sleep(400 * time.Millisecond) // more than the TTL: only renewals keep them
	for _, h := range hs {
		if h.Context().Err() != nil {
			t.Fatalf("handle lost although every renewal succeeded: %v", context.Cause(h.Context()))
		}
	}
	mu.Lock()
	n := len(batches)
	full := batches[0]
	mu.Unlock()
	if full != 100 {
		t.Fatalf("first batch renewed %d leases, want all 100 together", full)
	}
	if n < 3 {
		t.Fatalf("%d renewal rounds in 400ms at a 50ms interval", n)
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
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Minute,
		Interval: 10 * time.Millisecond,
		Renew:    renewAllLost,
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, time.Now(), nil)
	changed := h.LeaseChanged()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("LeaseChanged not closed when the lease was lost")
	}
	<-h.Context().Done()
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(h.Context()))
	}
	if s, _ := h.Lease(); s.Err != nil || s.Renewals != 0 {
		t.Fatalf("state after the loss = %+v; the context reports a loss, not Err", s)
	}
}

func TestKeeperTrustWindow(t *testing.T) {
	outage := errors.New("connection refused")
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      200 * time.Millisecond,
		Interval: 40 * time.Millisecond,
		Margin:   20 * time.Millisecond,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			calls.Add(1)
			errs := make([]error, len(b))
			for i := range errs {
				errs[i] = outage
			}
			return errs
		},
	})
	start := time.Now()
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, start, nil)
	<-h.Context().Done()
	took := time.Since(start)
	cause := context.Cause(h.Context())
	if !errors.Is(cause, core.ErrLockLost) || !errors.Is(cause, outage) {
		t.Fatalf("cause = %v, want ErrLockLost wrapping the renewal error", cause)
	}
	// Lost no earlier than the trust window allows (start + TTL − margin).
	if took < 180*time.Millisecond {
		t.Fatalf("lost after %v, before the trust window closed", took)
	}
	if calls.Load() < 2 {
		t.Fatalf("only %d renewal attempts before giving up", calls.Load())
	}
}

func TestKeeperReleaseStopsRenewal(t *testing.T) {
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Minute,
		Interval: 10 * time.Millisecond,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			calls.Add(1)
			return make([]error, len(b))
		},
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, time.Now(), nil)
	_ = h.Release(context.Background())
	if k.Len() != 0 {
		t.Fatal("lease still kept after Release")
	}
	n := calls.Load()
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != n {
		t.Fatal("renewals went on after Release")
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

func TestKeeperLosesWhenRenewHangs(t *testing.T) {
	release := make(chan struct{})
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      200 * time.Millisecond,
		Interval: 40 * time.Millisecond,
		Margin:   20 * time.Millisecond,
		// A renewal that ignores its context, as a driver without context
		// deadlines does against a frozen server.
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			<-release
			return make([]error, len(b))
		},
	})
	defer close(release)
	start := time.Now()
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, start, nil)
	select {
	case <-h.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a hanging renewal kept the lease trusted past its window")
	}
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(h.Context()))
	}
}

func TestKeeperRetriesWithoutSpinning(t *testing.T) {
	var calls atomic.Int32
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      time.Second,
		Interval: 200 * time.Millisecond,
		Renew: func(_ context.Context, b []*kit.Lease) []error {
			calls.Add(1)
			errs := make([]error, len(b))
			for i := range errs {
				errs[i] = errors.New("connection refused") // fails fast
			}
			return errs
		},
	})
	h := kit.NewHandle(1, noopRelease)
	k.Keep(h, time.Now(), nil)
	<-h.Context().Done() // the trust window closes after 0.9s
	// First renewal at 200ms, then a retry every 50ms: about 15 calls.
	if n := calls.Load(); n > 40 {
		t.Fatalf("%d renewal calls before the window closed: the retry spins", n)
	}
}

// TestKeeperReportsLeaseState follows one handle's LeaseState through a
// success, a failed renewal, a recovery and the release.
func TestKeeperReportsLeaseState(t *testing.T) {
	outage := errors.New("connection refused")
	var fail atomic.Bool
	const ttl, margin = 600 * time.Millisecond, 60 * time.Millisecond
	k := newKeeper(t, kit.KeeperConfig{
		TTL:      ttl,
		Interval: 50 * time.Millisecond,
		Margin:   margin,
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

	// next waits for the first state after the current one that satisfies
	// cond.
	next := func(what string, cond func(core.LeaseState) bool) core.LeaseState {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			changed := h.LeaseChanged()
			if s, _ := h.Lease(); cond(s) {
				return s
			}
			select {
			case <-changed:
			case <-deadline:
				s, _ := h.Lease()
				t.Fatalf("no %s: state %+v", what, s)
			}
		}
	}

	start := time.Now()
	k.Keep(h, start, nil)
	s, ok := h.Lease()
	if !ok || !s.Renewed.Equal(start) || !s.Deadline.Equal(start.Add(ttl-margin)) || s.Renewals != 0 || s.Err != nil {
		t.Fatalf("state after Keep = %+v, %v; want Renewed = start, Deadline = start + TTL − margin", s, ok)
	}

	s = next("renewal", func(s core.LeaseState) bool { return s.Renewals >= 2 })
	if !s.Renewed.After(start) || !s.Deadline.Equal(s.Renewed.Add(ttl-margin)) || s.Err != nil {
		t.Fatalf("state after renewals = %+v", s)
	}

	fail.Store(true)
	bad := next("failed renewal", func(s core.LeaseState) bool { return s.Err != nil })
	if !errors.Is(bad.Err, outage) {
		t.Fatalf("Err = %v, want the renewal's error", bad.Err)
	}
	if bad.Renewed.Before(s.Renewed) || !bad.Deadline.Equal(bad.Renewed.Add(ttl-margin)) {
		t.Fatalf("a failed renewal moved the trust window: %+v after %+v", bad, s)
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost on the first failed renewal, inside the trust window: %v", context.Cause(h.Context()))
	}

	fail.Store(false)
	good := next("recovery", func(s core.LeaseState) bool { return s.Err == nil })
	if good.Renewals <= bad.Renewals || !good.Renewed.After(bad.Renewed) {
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
	if s, ok := h.Lease(); !ok || s.Renewals < good.Renewals {
		t.Fatalf("Lease after Release = %+v, %v; want the last state", s, ok)
	}
}
