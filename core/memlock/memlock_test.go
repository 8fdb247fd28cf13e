package memlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/memlock"
)

func bg() context.Context { return context.Background() }

func newProvider(t *testing.T, opts ...memlock.Option) *memlock.Provider {
	t.Helper()
	p, err := memlock.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func mustTry(t *testing.T, l core.Locker) core.Handle {
	t.Helper()
	h, err := l.TryAcquire(bg())
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", l.Name(), err)
	}
	return h
}

func TestBreakByName(t *testing.T) {
	p := newProvider(t)
	q := newProvider(t, memlock.WithStore(p.Store()))
	m := mustTry(t, p.Mutex("job"))
	r := mustTry(t, q.RWMutex("job").RLocker())
	other := mustTry(t, p.Mutex("other"))
	if n := q.Break("job"); n != 2 {
		t.Fatalf("Break broke %d grants, want 2", n)
	}
	for _, h := range []core.Handle{m, r} {
		if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("cause after Break = %v, want ErrLockLost", cause)
		}
	}
	if other.Context().Err() != nil {
		t.Fatal("Break ended the handle of another name")
	}
	h := mustTry(t, q.Mutex("job")) // free at once
	if h.FencingToken() <= r.FencingToken() {
		t.Fatalf("token %d after a broken %d", h.FencingToken(), r.FencingToken())
	}
	_ = m.Release(bg()) // a broken handle's release frees nothing
	if _, err := p.Mutex("job").TryAcquire(bg()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a broken handle's release freed the next holder's lock: %v", err)
	}
}

func TestCloseFreesLocks(t *testing.T) {
	p := newProvider(t)
	q := newProvider(t, memlock.WithStore(p.Store()))
	h := mustTry(t, p.Semaphore("pool", 2))
	// q holds "m" before p's waiter starts, so the waiter cannot take it.
	mustTry(t, q.Mutex("m"))
	got := make(chan error, 1)
	go func() {
		_, err := p.Mutex("m").Acquire(bg())
		got <- err
	}()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		t.Fatalf("cause after Close = %v", context.Cause(h.Context()))
	}
	mustTry(t, q.Semaphore("pool", 1)) // the slot is free: one holder left
	if _, err := p.Mutex("x").TryAcquire(bg()); err == nil || errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire after Close = %v, want a closed error", err)
	}
	q.Break("m")
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("a waiter of a closed Provider was granted the lock")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter of a closed Provider is still waiting")
	}
}

func TestSemaphoreMaxMismatch(t *testing.T) {
	p := newProvider(t)
	mustTry(t, p.Semaphore("s", 3))
	_, err := p.Semaphore("s", 4).TryAcquire(bg())
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("another max while held: %v, want ErrInvalidArgument", err)
	}
}

func TestHolderIdentity(t *testing.T) {
	p := newProvider(t, memlock.WithIdentity("worker-1"))
	h := mustTry(t, p.Mutex("m"))
	who, held, err := newProvider(t, memlock.WithStore(p.Store())).Mutex("m").(core.Inspector).Holder(bg())
	if err != nil || !held || who.ID != "worker-1" || who.Token != h.FencingToken() {
		t.Fatalf("Holder = %+v, %v, %v", who, held, err)
	}
}

func TestMembership(t *testing.T) {
	p := newProvider(t)
	if err := p.Register(bg(), "g", "b", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(bg(), "g", "gone", time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	got, err := core.Heartbeat(bg(), p, "g", "a", time.Hour)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Heartbeat = %v, %v", got, err)
	}
	if err := p.Deregister(bg(), "g", "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Members(bg(), "g"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Members = %v", got)
	}
	if err := p.Register(bg(), "g", "a", 0); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("ttl 0: %v", err)
	}
	if err := p.Register(bg(), "", "a", time.Second); !errors.Is(err, core.ErrInvalidName) {
		t.Fatalf("empty group: %v", err)
	}
}

func TestNewBadInput(t *testing.T) {
	for name, opts := range map[string][]memlock.Option{
		"empty identity": {memlock.WithIdentity("")},
		"nil option":     {nil},
	} {
		if _, err := memlock.New(opts...); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestOpen(t *testing.T) {
	open := func(url string) *memlock.Provider {
		t.Helper()
		p, err := memlock.Open(bg(), url)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := open("mem://shared?identity=a"), open("mem://shared")
	mustTry(t, a.Mutex("m"))
	if _, err := b.Mutex("m").TryAcquire(bg()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("mem://shared twice: not one store: %v", err)
	}
	if who, _, _ := b.Mutex("m").(core.Inspector).Holder(bg()); who.ID != "a" {
		t.Fatalf("identity from the URL: holder %q", who.ID)
	}
	private := open("mem://")
	defer private.Close()
	mustTry(t, private.Mutex("m"))
	_ = a.Close()
	_ = b.Close()
	c := open("mem://shared") // the last Close dropped the store
	defer c.Close()
	mustTry(t, c.Mutex("m"))

	for _, bad := range []string{
		"redis://h", "mem://a,b", "mem://u@a", "mem://a/path", "mem://?ttl=1s", "mem://?identity=", "mem:", "mem://a:0",
	} {
		if p, err := memlock.Open(bg(), bad); !errors.Is(err, core.ErrInvalidArgument) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
