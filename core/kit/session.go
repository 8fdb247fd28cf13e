package kit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
)

// Sessions is the machinery of a backend whose locks belong to a database
// session rather than to a lease (pglock's advisory locks, mysqllock's
// GET_LOCK): the locks of a Provider live on a few long-lived sessions it
// pins, many locks to a session. A session either holds any number of
// locks and serves tries and releases (shared), or runs one blocking wait,
// which it only starts while it holds nothing, so a release never queues
// behind a wait. A keepalive goroutine pings, every Keepalive, each session
// that holds locks, one round trip per session however many locks it
// holds, and a ping that fails or overruns its deadline fails the session:
// it is closed, which makes the server free its locks, and every handle on
// it is lost (its context ends with a cause matching core.ErrLockLost). So
// does any statement that breaks the session.
//
// K is the backend's key of a lock on a session (a session holds a key at
// most once: the servers' locks are reentrant per session, ours are not),
// C its connection, X what else it records with a grant. The backend runs
// its statements on a session it has locked (Shared, Any, Empty return it
// locked); Sessions runs the rest: which session to use, the record of the
// grants, releases and local handoffs (SessionDriver's Unlock and Draw),
// liveness.
//
// Lock order: a Session's lock before the Sessions' own mutex, never after.
type Sessions[K comparable, C SessionConn, X any] struct {
	// Notify wakes the Provider's waiters, keyed by a grant's Wake.
	Notify Notifier
	// Hand lines up local waiters and hands grants on (Acquire,
	// HandsOff); its Limits come from the SessionConfig.
	Hand Handoffs[*Grant[K, C, X], *BaseHandle]

	backend   string
	log       *slog.Logger
	maxConns  int
	keepalive time.Duration
	d         SessionDriver[K, C, X]

	mu      sync.Mutex
	conns   []*Session[K, C, X]
	dialing int // sessions being dialed
	// dialingWaits counts those of them dialed for a blocking wait.
	dialingWaits int
	closed       bool
	changed      chan struct{} // closed and replaced whenever a session frees up

	// The keepalive loop runs from the first grant until Close.
	keepStarted bool
	keepStop    chan struct{}
	keepDone    chan struct{}
}

// SessionConn is a backend's connection, one database session.
type SessionConn interface {
	// Ping checks the session in one round trip, and fails once deadline
	// passes: a server that stopped answering (a cut network sends no
	// reset) must not hang it.
	Ping(deadline time.Time) error
	// Abort breaks the connection under a statement in progress, from any
	// goroutine: Close uses it to end blocking waits at once.
	Abort()
	// Close ends the session, and with it every lock it holds.
	Close()
}

// SessionDriver is what a backend gives Sessions besides its config.
type SessionDriver[K comparable, C SessionConn, X any] struct {
	// Dial opens and sets up a new session.
	Dial func(ctx context.Context) (C, error)
	// Unlock releases g on its session (locked): one round trip. An error
	// fails the session, which frees the lock.
	Unlock func(ctx context.Context, g *Grant[K, C, X]) error
	// Draw draws a new token for a local handoff of g on its session
	// (locked), in one round trip that succeeds only while the session
	// holds g's lock; it fails the session when the session broke or lost
	// the lock. Only needed with handoffs on.
	Draw func(ctx context.Context, g *Grant[K, C, X]) (uint64, error)
	// Verify, when set, asks the server whether g's session (not broken)
	// still holds g's lock, without using the session (which may be
	// busy): every handle of a grant implements core.Verifier with it.
	Verify func(ctx context.Context, g *Grant[K, C, X]) (bool, error)
	// Closed is the error of calls after Close, and the cause of the loss
	// of the handles Close loses.
	Closed error
}

// Session is one pinned session of a Sessions.
type Session[K comparable, C SessionConn, X any] struct {
	// Conn is the backend's connection.
	Conn C

	s  *Sessions[K, C, X]
	mu chan struct{} // one statement at a time: a mutex whose wait can end

	// Guarded by s.mu; held changes only under mu too.
	held    map[K]*Grant[K, C, X]
	waiting bool
	broken  bool
}

// Grant is one lock held on a Session.
type Grant[K comparable, C SessionConn, X any] struct {
	// Session holds the lock.
	Session *Session[K, C, X]
	// Key is the lock's key on the session.
	Key K
	// Wake is the lock's Notifier key, and its key in Hand.
	Wake string
	// Name is the lock's name, for errors.
	Name string
	// Info is the backend's own record.
	Info X
	// Handoff: a release may hand the grant on to a local waiter.
	Handoff bool

	run Run
	h   *BaseHandle
}

// Handle returns the grant's handle.
func (g *Grant[K, C, X]) Handle() *BaseHandle { return g.h }

var (
	// ErrSessionFailed marks an error that failed the session it ran on:
	// the session is gone, and any grant with it, so Try tries once more
	// on another.
	ErrSessionFailed = errors.New("session failed")

	errLocalBusy = errors.New("held by this process")
	errNoConn    = errors.New("every connection holds this lock already")
	errBroken    = errors.New("connection broken")
)

// NewSessions returns the Sessions of a backend's Provider configured by
// cfg (MaxConns, Keepalive, Handoff, Log). It does no I/O.
func NewSessions[K comparable, C SessionConn, X any](backend string, cfg SessionConfig, d SessionDriver[K, C, X]) *Sessions[K, C, X] {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if d.Closed == nil {
		d.Closed = fmt.Errorf("%s: provider closed", backend)
	}
	s := &Sessions[K, C, X]{
		backend: backend, log: log, maxConns: cfg.MaxConns, keepalive: cfg.Keepalive, d: d,
		changed: make(chan struct{}), keepStop: make(chan struct{}), keepDone: make(chan struct{}),
	}
	s.Hand.Limits = cfg.Handoff
	s.Hand.Wake = s.Notify.Notify
	return s
}

// Close closes the Sessions: blocking waits are aborted, the keepalive
// stops, every session is closed (the server frees its locks) and every
// handle on one is lost. Later calls fail.
func (s *Sessions[K, C, X]) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	for _, c := range conns {
		if c.waiting {
			// A blocking wait holds c.mu until the server answers:
			// breaking its connection ends the wait at once.
			c.Conn.Abort()
		}
	}
	s.signalLocked()
	keeping := s.keepStarted
	s.mu.Unlock()

	close(s.keepStop)
	if keeping {
		<-s.keepDone
	}
	s.Notify.NotifyAll()
	for _, c := range conns {
		c.Lock()
		c.Fail(s.d.Closed)
		c.Unlock()
	}
}

// Conns returns the sessions in service.
func (s *Sessions[K, C, X]) Conns() []*Session[K, C, X] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Session[K, C, X](nil), s.conns...)
}

// lockOpen locks s.mu, or returns the error of a closed Sessions.
func (s *Sessions[K, C, X]) lockOpen() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.d.Closed
	}
	return nil
}

// signalLocked wakes everyone waiting for a session to free up.
func (s *Sessions[K, C, X]) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// addLocked dials a new session with s.mu released and adds it. Called
// with s.mu held; returns with it held, or released with an error.
func (s *Sessions[K, C, X]) addLocked(ctx context.Context, waiting bool) (*Session[K, C, X], error) {
	s.dialing++
	if waiting {
		s.dialingWaits++
	}
	s.mu.Unlock()
	conn, err := s.d.Dial(ctx)
	s.mu.Lock()
	s.dialing--
	if waiting {
		s.dialingWaits--
	}
	if err == nil && s.closed {
		conn.Close()
		err = s.d.Closed
	}
	if err != nil {
		s.signalLocked()
		s.mu.Unlock()
		return nil, err
	}
	c := &Session[K, C, X]{Conn: conn, s: s, mu: make(chan struct{}, 1), held: make(map[K]*Grant[K, C, X]), waiting: waiting}
	s.conns = append(s.conns, c)
	s.signalLocked()
	return c, nil
}

// Shared returns, locked, a session fit to try key on: not waiting, and
// not holding key already. When a grant of this Provider holds key and
// excludes(that grant) (an exclusive request or holder), the error is
// ErrLocalBusy's, without I/O; otherwise sessions holding key are passed
// over.
func (s *Sessions[K, C, X]) Shared(ctx context.Context, key K, excludes func(*Grant[K, C, X]) bool) (*Session[K, C, X], error) {
	return s.shared(ctx, &key, excludes)
}

// Any returns, locked, a session fit to try several keys on (a
// semaphore's slots): any that is not waiting. The caller skips the keys
// it holds (Unheld).
func (s *Sessions[K, C, X]) Any(ctx context.Context) (*Session[K, C, X], error) {
	return s.shared(ctx, nil, nil)
}

func (s *Sessions[K, C, X]) shared(ctx context.Context, key *K, excludes func(*Grant[K, C, X]) bool) (*Session[K, C, X], error) {
	for {
		if err := s.lockOpen(); err != nil {
			return nil, err
		}
		var pick *Session[K, C, X]
		for _, c := range s.conns {
			if c.waiting || c.broken {
				continue
			}
			if key != nil {
				if g := c.held[*key]; g != nil {
					if excludes(g) {
						s.mu.Unlock()
						return nil, errLocalBusy
					}
					continue
				}
			}
			// Prefer sessions that already hold locks: it keeps empty
			// ones free for blocking waits.
			if pick == nil || (len(pick.held) == 0 && len(c.held) > 0) {
				pick = c
			}
		}
		if pick == nil {
			if s.dialing == 0 && len(s.conns) >= s.maxConns {
				// Only holders of this very key can fill every session
				// (waits always leave one free).
				s.mu.Unlock()
				return nil, errNoConn
			}
			// Wait for a session being dialed rather than dial one each
			// when many acquires start at once.
			if s.dialing > 0 {
				ch := s.changed
				s.mu.Unlock()
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return nil, NotAcquired(ctx)
				}
			}
			c, err := s.addLocked(ctx, false)
			if err != nil {
				return nil, err
			}
			pick = c
		}
		s.mu.Unlock()
		if s.take(pick, false, func() bool { return !pick.waiting && (key == nil || pick.held[*key] == nil) }) {
			return pick, nil
		}
	}
}

// Empty reserves, locked and marked waiting, a session that holds nothing,
// dialing one if there is room, for one blocking wait. It returns nil when
// every session is busy and there is no room for another: waits leave at
// least one session to tries and releases, so a TryAcquire never queues
// behind them. End the reservation with DoneWaiting, or a grant.
func (s *Sessions[K, C, X]) Empty(ctx context.Context) (*Session[K, C, X], error) {
	for {
		if err := s.lockOpen(); err != nil {
			return nil, err
		}
		var pick *Session[K, C, X]
		waiting := s.dialingWaits
		for _, c := range s.conns {
			if c.waiting {
				waiting++
			} else if pick == nil && !c.broken && len(c.held) == 0 {
				pick = c
			}
		}
		if waiting >= s.maxConns-1 {
			s.mu.Unlock()
			return nil, nil
		}
		if pick != nil {
			pick.waiting = true
		} else {
			if len(s.conns)+s.dialing >= s.maxConns {
				s.mu.Unlock()
				return nil, nil
			}
			c, err := s.addLocked(ctx, true)
			if err != nil {
				return nil, err
			}
			pick = c
		}
		s.mu.Unlock()
		if s.take(pick, true, func() bool { return len(pick.held) == 0 }) {
			return pick, nil
		}
	}
}

// take locks c, picked with s.mu held, and reports whether it is still in
// service and fit (checked under s.mu) now that the lock is ours; if not,
// it unlocks c and, when reserved (for a wait), ends the reservation.
func (s *Sessions[K, C, X]) take(c *Session[K, C, X], reserved bool, fit func() bool) bool {
	c.Lock()
	s.mu.Lock()
	ok := !c.broken && fit()
	if !ok && reserved {
		c.waiting = false
	}
	s.mu.Unlock()
	if !ok {
		c.Unlock()
	}
	return ok
}

// Lock takes the session for one statement.
func (c *Session[K, C, X]) Lock() { c.mu <- struct{}{} }

// Unlock lets the next statement run.
func (c *Session[K, C, X]) Unlock() { <-c.mu }

// Broken reports whether c is out of service.
func (c *Session[K, C, X]) Broken() bool {
	return c.state(func() bool { return c.broken })
}

// Waiting reports whether c is reserved for a blocking wait.
func (c *Session[K, C, X]) Waiting() bool {
	return c.state(func() bool { return c.waiting })
}

// state reads f under the Sessions' mutex.
func (c *Session[K, C, X]) state(f func() bool) bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return f()
}

// Grants returns the grants c holds.
func (c *Session[K, C, X]) Grants() []*Grant[K, C, X] {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	gs := make([]*Grant[K, C, X], 0, len(c.held))
	for _, g := range c.held {
		gs = append(gs, g)
	}
	return gs
}

// Unheld returns keys, rotated to start at index first, without those c
// holds: the candidates of a semaphore's try on c.
func (c *Session[K, C, X]) Unheld(keys []K, first int) []K {
	out := make([]K, 0, len(keys))
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for i := range keys {
		if k := keys[(first+i)%len(keys)]; c.held[k] == nil {
			out = append(out, k)
		}
	}
	return out
}

// DoneWaiting ends a reservation made by Empty and unlocks c.
func (c *Session[K, C, X]) DoneWaiting() {
	s := c.s
	s.mu.Lock()
	c.waiting = false
	s.signalLocked()
	s.mu.Unlock()
	c.Unlock()
	s.Notify.NotifyAll()
}

// Fail takes c (locked) out of service after err: it is closed, which
// makes the server free every lock of its session, and every handle on it
// is lost.
func (c *Session[K, C, X]) Fail(err error) {
	s := c.s
	s.mu.Lock()
	if c.broken {
		s.mu.Unlock()
		return
	}
	c.broken = true
	if i := slices.Index(s.conns, c); i >= 0 {
		s.conns = slices.Delete(s.conns, i, i+1)
	}
	lost := make([]*Grant[K, C, X], 0, len(c.held))
	for _, g := range c.held {
		lost = append(lost, g)
		s.Hand.DropHolder(g.Wake, g)
	}
	clear(c.held)
	s.signalLocked()
	s.mu.Unlock()

	c.Conn.Close()
	why := fmt.Errorf("%w: connection failed: %w", core.ErrLockLost, err)
	if len(lost) > 0 {
		s.log.Warn("distlock: connection failed; its locks are lost", "backend", s.backend, "locks", len(lost), "err", err)
	}
	for _, g := range lost {
		g.h.Lose(why)
		s.Notify.Notify(g.Wake)
	}
	s.Notify.NotifyAll()
}

// keepalive pings, every keepalive period, each session that holds locks.
// It runs from the first grant until Close.
func (s *Sessions[K, C, X]) keepaliveLoop() {
	defer close(s.keepDone)
	t := time.NewTicker(s.keepalive)
	defer t.Stop()
	for {
		select {
		case <-s.keepStop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var due []*Session[K, C, X]
		for _, c := range s.conns {
			if len(c.held) > 0 && !c.broken {
				due = append(due, c)
			}
		}
		s.mu.Unlock()
		for _, c := range due {
			c.ping(s.keepalive)
		}
	}
}

// ping checks c in one round trip and fails it if the ping fails or takes
// longer than d. A session busy with another statement for all of d is
// skipped: that statement reports its own failure. The ping's d starts
// once it has the session, so time spent waiting behind our own statements
// never counts against a healthy server.
func (c *Session[K, C, X]) ping(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case c.mu <- struct{}{}:
	case <-t.C:
		return
	}
	defer c.Unlock()
	if c.Broken() {
		return
	}
	if err := c.Conn.Ping(time.Now().Add(d)); err != nil {
		c.Fail(fmt.Errorf("keepalive: %w", err))
	}
}
