package kit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/core"
)

// The life of a lock on Sessions: an acquire tries on a shared session
// (Try), blocks on an empty one when the lock is busy (SessionAcquire), a
// grant becomes a handle (Session.Grant), and its release hands the lock
// on to a local waiter or unlocks it (SessionDriver.Draw, Unlock).

// Run returns the grant's place in a run of local handoffs.
func (g *Grant[K, C, X]) Run() Run { return g.run }

// Try runs try on a session that pick returns locked; try unlocks it. A
// lock that a grant of this Provider holds, or no session to try on,
// gives an error matching core.ErrNotAcquired without I/O. When try's
// error matches ErrSessionFailed (the session broke, and any grant with
// it), it runs once more on another session: a session that broke while
// idle must not fail the acquire.
func (s *Sessions[K, C, X]) Try(ctx context.Context, pick func(ctx context.Context) (*Session[K, C, X], error), try func(c *Session[K, C, X]) (core.Handle, error)) (core.Handle, error) {
	for attempt := 0; ; attempt++ {
		c, err := pick(ctx)
		if errors.Is(err, errLocalBusy) || errors.Is(err, errNoConn) {
			return nil, Busy("%v", err)
		}
		if err != nil {
			return nil, err
		}
		h, err := try(c)
		if err != nil && attempt == 0 && errors.Is(err, ErrSessionFailed) {
			continue
		}
		return h, err
	}
}

// Grant records g as granted on c (locked) with token, unlocks c, and
// returns g's handle; when ctx ended meanwhile it releases the grant and
// returns an error matching core.ErrNotAcquired and ctx.Err().
func (c *Session[K, C, X]) Grant(ctx context.Context, g *Grant[K, C, X], token uint64) (core.Handle, error) {
	s := c.s
	g.Session, g.run = c, StartRun(time.Now())
	g.h = s.newHandle(g, token)
	s.mu.Lock()
	c.held[g.Key] = g
	c.waiting = false
	if g.Handoff {
		s.Hand.SetHolder(g.Wake, g)
	}
	start := !s.keepStarted && !s.closed
	s.keepStarted = s.keepStarted || start
	s.mu.Unlock()
	if start {
		go s.keepaliveLoop()
	}
	c.Unlock()
	if ctx.Err() != nil {
		_ = g.h.Release(ctx)
		return nil, NotAcquired(ctx)
	}
	return g.h, nil
}

// newHandle makes the handle of g with token, verified by the driver's
// Verify when it has one: a broken session holds nothing, without asking.
func (s *Sessions[K, C, X]) newHandle(g *Grant[K, C, X], token uint64) *BaseHandle {
	h := NewHandle(token, func(rctx context.Context) error { return s.release(rctx, g) })
	if s.d.Verify != nil {
		h.SetVerify(func(ctx context.Context) (bool, error) {
			if g.Session.Broken() {
				return false, nil
			}
			return s.d.Verify(ctx, g)
		})
	}
	return h
}

// release unlocks g on its session: one round trip. When the session has
// failed, the server has already freed the lock and release returns nil.
// When the unlock fails, the session is failed (ending it is the sure way
// to free the lock), which loses the other handles on it. When a waiter
// of this Provider can take the lock over, release hands it on instead,
// keeping the lock on the session.
func (s *Sessions[K, C, X]) release(ctx context.Context, g *Grant[K, C, X]) error {
	if s.handOff(ctx, g) {
		return nil
	}
	c := g.Session
	c.Lock()
	defer c.Unlock()
	if c.Broken() {
		return nil
	}
	if err := s.d.Unlock(ctx, g); err != nil {
		c.Fail(fmt.Errorf("release: %w", err))
		return Wrap(s.backend, "release", g.Name, err)
	}
	s.mu.Lock()
	if c.held[g.Key] == g {
		delete(c.held, g.Key)
	}
	s.Hand.DropHolder(g.Wake, g)
	empty := len(c.held) == 0
	if empty {
		s.signalLocked()
	}
	s.mu.Unlock()
	s.Notify.Notify(g.Wake)
	if empty {
		s.Notify.NotifyAll()
	}
	return nil
}

// Holds reports whether g's session is sound and still holds g.
func (s *Sessions[K, C, X]) Holds(g *Grant[K, C, X]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !g.Session.broken && g.Session.held[g.Key] == g
}

// handOff passes g, being released, to the first local waiter of its line
// (Handoffs.Pass) with a token that Draw draws on g's session. It reports
// whether it did: the lock then stays held by the session under the
// waiter's new grant.
func (s *Sessions[K, C, X]) handOff(ctx context.Context, g *Grant[K, C, X]) bool {
	if !g.Handoff {
		return false
	}
	handed, _ := s.Hand.Pass(ctx, g.Wake, g.run, func(ctx context.Context, run Run) (*BaseHandle, error) {
		c := g.Session
		c.Lock()
		defer c.Unlock()
		if !s.Holds(g) {
			return nil, errBroken
		}
		token, err := s.d.Draw(ctx, g)
		if err != nil {
			return nil, err
		}
		n := &Grant[K, C, X]{Session: c, Key: g.Key, Wake: g.Wake, Name: g.Name, Info: g.Info, Handoff: true, run: run}
		n.h = s.newHandle(n, token)
		s.mu.Lock()
		defer s.mu.Unlock()
		if c.broken {
			return nil, errBroken
		}
		c.held[g.Key] = n
		s.Hand.SetHolder(g.Wake, n)
		return n.h, nil
	})
	return handed
}

// SessionAcquire is one Acquire on Sessions.
type SessionAcquire[K comparable, C SessionConn, X any] struct {
	// Name names the lock in errors.
	Name string
	// Wake is the lock's Notifier key, and its line's key in Hand.
	Wake string
	// HandsOff: the acquire lines up in Hand (a lock whose grants a
	// release may hand on).
	HandsOff bool
	// Backoff paces the attempts (DefaultBackoff when zero).
	Backoff Backoff
	// Try is one try on a shared session (Try).
	Try func(ctx context.Context) (core.Handle, error)
	// Block, when set, waits in the server's queue on c, a session Empty
	// reserved, after a busy try; it ends the reservation or grants. Without
	// Block, or without an empty session, the acquire backs off.
	Block func(ctx context.Context, c *Session[K, C, X]) (core.Handle, time.Duration, error)
}

// Acquire waits until a grant or until ctx is done: each attempt tries,
// then blocks on an empty session. With a.HandsOff it first lines up
// behind the Provider's earlier waiters for the lock, and while a handle
// of this Provider holds it, waits for that release to hand it over
// locally. Its errors are wrapped (Wrap).
func (s *Sessions[K, C, X]) Acquire(ctx context.Context, a SessionAcquire[K, C, X]) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, Wrap(s.backend, "acquire", a.Name, NotAcquired(ctx))
	}
	wake, unsubscribe := s.Notify.Subscribe(a.Wake)
	defer unsubscribe()
	backoff := a.Backoff
	if backoff == (Backoff{}) {
		backoff = DefaultBackoff
	}
	attempt := func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := a.Try(ctx)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) || a.Block == nil {
			return h, 0, err
		}
		c, cerr := s.Empty(ctx)
		if cerr != nil {
			return nil, 0, cerr
		}
		if c == nil {
			return nil, 0, err // no session to wait on: back off
		}
		return a.Block(ctx, c)
	}
	var h core.Handle
	var err error
	if a.HandsOff {
		h, err = s.acquireLocal(ctx, a.Wake, wake, backoff, attempt)
	} else {
		h, err = Wait(ctx, backoff, wake, attempt)
	}
	if err != nil {
		return nil, Wrap(s.backend, "acquire", a.Name, err)
	}
	return h, nil
}

// acquireLocal is Acquire with handoffs: the caller lines up behind this
// Provider's earlier waiters for the lock; once first, each attempt takes
// a grant a release handed it, waits locally while a local grant holds the
// lock, and otherwise runs attempt.
func (s *Sessions[K, C, X]) acquireLocal(ctx context.Context, key string, wake <-chan struct{}, backoff Backoff, attempt Attempt) (core.Handle, error) {
	return s.Hand.Wait(ctx, key, key, func(ctx context.Context, w *Waiter[*BaseHandle]) (core.Handle, error) {
		return Wait(ctx, backoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
			if g, ok := s.Hand.Take(key, w); ok {
				return g, 0, nil
			}
			if s.localHolder(key) || !s.Hand.Away(w) {
				// Held here (or a handoff to us is under way): its release
				// hands the lock over, or unlocks it and wakes us.
				return nil, 0, Busy("held by this process")
			}
			h, retry, err := attempt(ctx)
			s.Hand.Back(w)
			return h, retry, err
		})
	})
}

// localHolder reports whether the lock of key is held by a live local
// grant.
func (s *Sessions[K, C, X]) localHolder(key string) bool {
	g, ok := s.Hand.Holder(key)
	return ok && s.Holds(g)
}

// TryAcquire is a backend's TryAcquire: try, unless ctx is done already,
// with its error wrapped.
func (s *Sessions[K, C, X]) TryAcquire(ctx context.Context, name string, try func(context.Context) (core.Handle, error)) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, Wrap(s.backend, "acquire", name, NotAcquired(ctx))
	}
	h, err := try(ctx)
	if err != nil {
		return nil, Wrap(s.backend, "acquire", name, err)
	}
	return h, nil
}
