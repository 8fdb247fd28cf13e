package kit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// fakeSession stands in for a database session: the machinery under test
// is Sessions' bookkeeping, not a server's.
type fakeSession struct {
	mu      sync.Mutex
	pingErr error
	pinged  chan struct{}
	closed  bool
	aborted bool
}

func (f *fakeSession) Ping(time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.pinged <- struct{}{}:
	default:
	}
	return f.pingErr
}

func (f *fakeSession) Abort() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = true
}

func (f *fakeSession) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

type testSessions = Sessions[string, *fakeSession, struct{}]

func newTestSessions(t *testing.T, maxConns int, keepalive time.Duration) (*testSessions, *[]*fakeSession) {
	t.Helper()
	var mu sync.Mutex
	var dialed []*fakeSession
	cfg := DefaultSessionConfig("seq", "members")
	cfg.MaxConns, cfg.Keepalive = maxConns, keepalive
	s := NewSessions("test", cfg, SessionDriver[string, *fakeSession, struct{}]{
		Dial: func(context.Context) (*fakeSession, error) {
			f := &fakeSession{pinged: make(chan struct{}, 1)}
			mu.Lock()
			dialed = append(dialed, f)
			mu.Unlock()
			return f, nil
		},
		Unlock: func(context.Context, *Grant[string, *fakeSession, struct{}]) error { return nil },
	})
	t.Cleanup(s.Close)
	return s, &dialed
}

// grantOn takes key on a shared session of s.
func grantOn(t *testing.T, s *testSessions, key string) core.Handle {
	t.Helper()
	h, err := s.Try(context.Background(), func(ctx context.Context) (*Session[string, *fakeSession, struct{}], error) {
		return s.Shared(ctx, key, func(*Grant[string, *fakeSession, struct{}]) bool { return true })
	}, func(c *Session[string, *fakeSession, struct{}]) (core.Handle, error) {
		return c.Grant(context.Background(), &Grant[string, *fakeSession, struct{}]{Key: key, Wake: key, Name: key}, 1)
	})
	if err != nil {
		t.Fatalf("grant %s: %v", key, err)
	}
	return h
}

// Many locks share one session; a lock held here is busy without I/O; a
// release frees it for the next grant.
func TestSessionsMultiplex(t *testing.T) {
	s, dialed := newTestSessions(t, 4, time.Hour)
	var hs []core.Handle
	for _, k := range []string{"a", "b", "c"} {
		hs = append(hs, grantOn(t, s, k))
	}
	if n := len(*dialed); n != 1 {
		t.Fatalf("%d sessions dialed for 3 locks, want 1", n)
	}
	_, err := s.Try(context.Background(), func(ctx context.Context) (*Session[string, *fakeSession, struct{}], error) {
		return s.Shared(ctx, "a", func(*Grant[string, *fakeSession, struct{}]) bool { return true })
	}, func(c *Session[string, *fakeSession, struct{}]) (core.Handle, error) {
		t.Error("tried a lock this process holds")
		c.Unlock()
		return nil, nil
	})
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a held lock: %v, want ErrNotAcquired", err)
	}
	if err := hs[0].Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	grantOn(t, s, "a")
}

// Blocking waits leave one session to tries and releases.
func TestSessionsEmptyLeavesOne(t *testing.T) {
	s, _ := newTestSessions(t, 2, time.Hour)
	c, err := s.Empty(context.Background())
	if err != nil || c == nil {
		t.Fatalf("first wait: %v, %v", c, err)
	}
	defer c.DoneWaiting()
	c2, err := s.Empty(context.Background())
	if c2 != nil {
		c2.DoneWaiting()
	}
	if err != nil || c2 != nil {
		t.Fatalf("second wait of 2 sessions: %v, %v; want none", c2, err)
	}
	grantOn(t, s, "x") // a try still finds a session
}

// A failed keepalive ping loses every handle on the session with
// ErrLockLost and closes it; Close loses the others and aborts waits.
func TestSessionsKeepaliveAndClose(t *testing.T) {
	s, dialed := newTestSessions(t, 3, 10*time.Millisecond)
	h1, h2 := grantOn(t, s, "a"), grantOn(t, s, "b")
	f := (*dialed)[0]
	f.mu.Lock()
	f.pingErr = errors.New("server gone")
	f.mu.Unlock()
	for _, h := range []core.Handle{h1, h2} {
		select {
		case <-h.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("not lost within 10s of a failing keepalive")
		}
		if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", context.Cause(h.Context()))
		}
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if !closed {
		t.Fatal("the failed session was not closed")
	}

	h3 := grantOn(t, s, "a")
	w, err := s.Empty(context.Background())
	if err != nil || w == nil {
		t.Fatalf("wait: %v, %v", w, err)
	}
	go func() { s.Close() }()
	select {
	case <-h3.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not lose the handle")
	}
	w.Conn.mu.Lock()
	aborted := w.Conn.aborted
	w.Conn.mu.Unlock()
	if !aborted {
		t.Error("Close did not abort the waiting session")
	}
	w.DoneWaiting()
	if _, err := s.Empty(context.Background()); err == nil {
		t.Error("Empty after Close: no error")
	}
}
