package kit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// must stops the test when ok is false.
func must(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatal(what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fakeLock is a backend of one lock with a token counter: a release hands
// the lock on through Pass when it can, and frees it otherwise.
type fakeLock struct {
	hs     Handoffs[*fakeGrant, *BaseHandle]
	notify Notifier
	tokens atomic.Uint64
	freed  atomic.Int32 // releases that freed the lock
	broken atomic.Bool  // the next draws fail, as on a lock broken from outside
}

type fakeGrant struct {
	h   *BaseHandle
	run Run
}

func newFakeLock(limits HandoffLimits) *fakeLock {
	f := &fakeLock{}
	f.hs.Limits = limits
	f.hs.Wake = f.notify.Notify
	return f
}

func (f *fakeLock) grant(run Run) *BaseHandle {
	g := &fakeGrant{run: run}
	g.h = NewHandle(f.tokens.Add(1), func(ctx context.Context) error {
		f.hs.DropHolder("k", g)
		handed, err := f.hs.Pass(ctx, "k", g.run, func(ctx context.Context, next Run) (*BaseHandle, error) {
			if f.broken.Load() {
				return nil, errors.New("not ours any more")
			}
			return f.grant(next), nil
		})
		if !handed {
			f.freed.Add(1)
			f.notify.Notify("k")
		}
		return err
	})
	f.hs.SetHolder("k", g)
	return g.h
}

// acquire waits in line: a handoff, or the lock when no one holds it.
func (f *fakeLock) acquire(ctx context.Context) (core.Handle, error) {
	return f.hs.Wait(ctx, "k", "k", func(ctx context.Context, w *Waiter[*BaseHandle]) (core.Handle, error) {
		wake, unsubscribe := f.notify.Subscribe("k")
		defer unsubscribe()
		for {
			if h, ok := f.hs.Take("k", w); ok {
				return h, nil
			}
			if _, held := f.hs.Holder("k"); !held && f.hs.Away(w) {
				return f.grant(StartRun(time.Now())), nil
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return nil, NotAcquired(ctx)
			}
		}
	})
}

// queue starts an acquire and returns its result channel once it stands in
// the line behind n waiters or holders.
func (f *fakeLock) queue(t *testing.T, ctx context.Context, n int) <-chan core.Handle {
	t.Helper()
	out := make(chan core.Handle, 1)
	go func() {
		h, err := f.acquire(ctx)
		if err != nil {
			h = nil
		}
		out <- h
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.lineLen() <= n {
		must(t, time.Now().Before(deadline), "the waiter never lined up")
		time.Sleep(100 * time.Microsecond) // polling an event without a channel
	}
	return out
}

func (f *fakeLock) lineLen() int {
	f.hs.mu.Lock()
	defer f.hs.mu.Unlock()
	return len(f.hs.lines["k"])
}

func recv(t *testing.T, ch <-chan core.Handle) core.Handle {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no grant within 10 s")
		return nil
	}
}

func TestHandoffPassesRunAndFreesAtItsEnd(t *testing.T) {
	ctx := context.Background()
	f := newFakeLock(HandoffLimits{Max: 2, Span: time.Hour})
	h, err := f.acquire(ctx)
	must(t, err == nil, "first acquire")
	for i := range 3 {
		next := f.queue(t, ctx, 0)
		must(t, h.Release(ctx) == nil, "release")
		g := recv(t, next)
		must(t, g != nil, "waiter got no grant")
		must(t, g.FencingToken() > h.FencingToken(), "token did not increase")
		// Two handoffs in a row, then the run ends with a free.
		must(t, f.freed.Load() == int32(max(0, i-1)), "freed count")
		h = g
	}
	must(t, h.Release(ctx) == nil, "last release")
}

func TestHandoffSpanAndOff(t *testing.T) {
	hs := Handoffs[*int, *BaseHandle]{Limits: HandoffLimits{Max: 8, Span: time.Millisecond}}
	must(t, hs.Within(StartRun(time.Now())), "a fresh run is within bounds")
	must(t, !hs.Within(StartRun(time.Now().Add(-time.Second))), "a run older than Span is over")
	hs.Limits = HandoffLimits{}
	must(t, !hs.On() && !hs.Within(StartRun(time.Now())), "Max 0 turns handoffs off")
}

func TestHandoffBrokenLockIsFreed(t *testing.T) {
	ctx := context.Background()
	f := newFakeLock(DefaultHandoffLimits())
	h, _ := f.acquire(ctx)
	next := f.queue(t, ctx, 0)
	f.broken.Store(true)
	must(t, h.Release(ctx) == nil, "release")
	must(t, f.freed.Load() == 1, "a failed draw frees the lock")
	g := recv(t, next) // the waiter contends and takes the free lock
	must(t, g != nil, "waiter got no grant")
	_ = g.Release(ctx)
}

func TestHandoffToWaiterThatGaveUp(t *testing.T) {
	ctx := context.Background()
	f := newFakeLock(DefaultHandoffLimits())
	h, _ := f.acquire(ctx)
	wctx, cancel := context.WithCancel(ctx)
	gone := f.queue(t, wctx, 0)
	next := f.queue(t, ctx, 1)
	// The first waiter gives up while the release draws its token: its
	// grant goes on to the second waiter.
	var token uint64
	handed, err := f.hs.Pass(ctx, "k", StartRun(time.Now()), func(ctx context.Context, run Run) (*BaseHandle, error) {
		cancel()
		must(t, recv(t, gone) == nil, "a cancelled waiter got a grant")
		g := f.grant(run)
		token = g.FencingToken()
		return g, nil
	})
	must(t, handed && err == nil, "handed on")
	g := recv(t, next)
	must(t, g != nil && g.FencingToken() > token, "second waiter got the lock")
	_ = h.Release(ctx) // the first grant's release finds no one left
	_ = g.Release(ctx)
	must(t, f.lineLen() == 0, "line empty")
}

func TestHandoffLine(t *testing.T) {
	var hs Handoffs[*int, *BaseHandle]
	a, first := hs.Enqueue("k", "a")
	must(t, first && isClosed(a.Turn()), "a is first")
	b, first := hs.Enqueue("k", "b")
	must(t, !first && !isClosed(b.Turn()), "b waits")
	tag, ok := hs.First("k")
	must(t, ok && tag == "a", "First is a")

	// Only the first, idle waiter can be claimed, once.
	must(t, hs.claim("k") == a, "claim a")
	must(t, hs.claim("k") == nil, "claimed once")
	must(t, !hs.Away(a), "a claimed waiter must wait for its handoff")
	grant := NewHandle(1, func(context.Context) error { return nil })
	must(t, hs.deliver(a, grant), "deliver to a")
	h, ok := hs.Take("k", a)
	must(t, ok && h == grant, "a takes its grant")
	must(t, isClosed(b.Turn()), "b moved up")

	// An away waiter is not claimed until it is back.
	must(t, hs.Away(b), "b away")
	must(t, hs.claim("k") == nil, "away is not claimed")
	hs.Back(b)
	must(t, hs.claim("k") == b, "claim b")

	// A waiter that leaves after its delivery gets the grant; one that
	// left before makes the delivery fail.
	must(t, hs.deliver(b, grant), "deliver to b")
	h, ok = hs.Leave("k", b)
	must(t, ok && h == grant, "b leaves with its grant")
	must(t, !hs.deliver(b, grant), "b is gone")
	_, ok = hs.First("k")
	must(t, !ok, "line empty")
}

func TestHandoffHolder(t *testing.T) {
	var hs Handoffs[*int, *BaseHandle]
	x, y := new(int), new(int)
	_, ok := hs.Holder("k")
	must(t, !ok, "no holder")
	hs.SetHolder("k", x)
	hs.SetHolder("k", y)
	hs.DropHolder("k", x) // no longer the holder: nothing happens
	got, ok := hs.Holder("k")
	must(t, ok && got == y, "holder y")
	hs.DropHolder("k", y)
	_, ok = hs.Holder("k")
	must(t, !ok, "no holder")
}

func TestHandoffLimitsValidate(t *testing.T) {
	for _, l := range []HandoffLimits{{Max: -1, Span: time.Second}, {Max: 1}, {Max: 1, Span: -time.Second}} {
		err := l.Validate("test")
		must(t, errors.Is(err, core.ErrInvalidArgument), "want ErrInvalidArgument for "+err.Error())
	}
	must(t, HandoffLimits{}.Validate("test") == nil, "off is valid")
	must(t, DefaultHandoffLimits().Validate("test") == nil, "defaults are valid")
}

// A grant handed on by Pass is reported as a local handoff.
func TestHandoffMarksGrant(t *testing.T) {
	f := newFakeLock(DefaultHandoffLimits())
	h := f.grant(StartRun(time.Now()))
	ctx := context.Background()
	got := f.queue(t, ctx, 0)
	must(t, h.Release(ctx) == nil, "release failed")
	next := recv(t, got)
	must(t, next != nil && next.(*BaseHandle).handedBy() == "local", "the handed grant is not marked local")
	must(t, h.handedBy() == "", "the first grant is marked")
}
