package redisop

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

// Waker turns the release and handoff announcements published on a
// Client's channels into wake-ups of local waiters. One pub/sub
// subscription to its channels (a Client's Channel, and the Inbox of mutex
// handoffs when it differs), kept open while some waiter listens (and for
// a few seconds after the last one stops, to spare reconnects under steady
// contention), fans each message out through a kit.Notifier keyed by the
// lock's WakeKey or the waiter's HandoffKey.
//
// When the subscription breaks or is (re)established every waiter is woken,
// since a release may have gone unseen; waiters also retry on a backoff, so
// a lost signal costs latency, never correctness.
type Waker struct {
	rdb      redis.UniversalClient
	channels []string
	log      *slog.Logger
	n        kit.Notifier

	mu     sync.Mutex
	keys   int         // keys with waiters
	run    *listener   // nil when not listening
	idle   *time.Timer // stops run after wakerLinger without waiters
	closed bool
	wg     sync.WaitGroup

	hmu     sync.Mutex
	expects map[string]*expected // HandoffKeys of waiting mutex acquires

	// live is the number of the subscription that the server confirmed
	// on every channel and that still runs, 0 when none does (Listening);
	// subs numbers them.
	live, subs atomic.Uint64
}

// wakerLinger is how long the subscription stays open after its last
// waiter stopped listening.
const wakerLinger = 5 * time.Second

// NewWaker returns a Waker listening on channels through rdb. It does no
// I/O until a waiter subscribes. log receives reconnect warnings; nil
// discards them.
func NewWaker(rdb redis.UniversalClient, log *slog.Logger, channels ...string) *Waker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Waker{rdb: rdb, channels: channels, log: log, expects: map[string]*expected{}}
	w.n.OnFirst = w.first
	w.n.OnLast = w.last
	return w
}

// Subscribe returns a channel that receives when the lock with wake key key
// (Client.WakeKey) may have been released, or a handoff to the waiter with
// HandoffKey key was announced, and the func that stops listening.
// Subscribe before the attempt whose failure you will wait on.
func (w *Waker) Subscribe(key string) (<-chan struct{}, func()) {
	return w.n.Subscribe(key)
}

// Notify wakes the local subscribers of key, as an announcement of key
// would: a backend that hands a lock on within its process uses it.
func (w *Waker) Notify(key string) { w.n.Notify(key) }

// Listening returns a number that stays the same, and is not 0, for as
// long as one subscription of the Waker runs that the server confirmed on
// every channel: every message published meanwhile reaches the Waker. It
// returns 0 when none runs.
func (w *Waker) Listening() uint64 { return w.live.Load() }

// Waiting returns how many keys have subscribers.
func (w *Waker) Waiting() int { return w.n.Len() }

// expected is what was announced to a waiting mutex acquire registered by
// ExpectHandoff or ExpectTurn.
type expected struct {
	tok   uint64 // the token of a handoff not taken yet (0: none)
	last  uint64 // the token of the last handoff announced (0: none)
	heard bool   // some announcement came
}

// expect registers key, and returns its entry and the func that
// unregisters it. Register before the attempt that may queue the waiter,
// so that an announcement that comes before it subscribes is kept.
func (w *Waker) expect(key string) (*expected, func()) {
	e := &expected{}
	w.hmu.Lock()
	w.expects[key] = e
	w.hmu.Unlock()
	return e, func() {
		w.hmu.Lock()
		delete(w.expects, key)
		w.hmu.Unlock()
	}
}

// ExpectHandoff registers a waiting mutex acquire under its HandoffKey
// (see expect). take returns the token of a handoff announced since (0 if
// none), once; forget unregisters.
func (w *Waker) ExpectHandoff(key string) (take func() uint64, forget func()) {
	e, forget := w.expect(key)
	take = func() uint64 {
		w.hmu.Lock()
		defer w.hmu.Unlock()
		tok := e.tok
		e.tok = 0
		return tok
	}
	return take, forget
}

// ExpectTurn registers a waiting mutex acquire under its HandoffKey (see
// expect), for RedLock's ticket order, where a release hands the lock over
// or only announces the waiter's turn. turn reports whether an
// announcement came since, and the token of the last handover announced
// (0 if none); it forgets nothing, as a waiter tells a stale handover by
// its token (Result.Counter). forget unregisters.
func (w *Waker) ExpectTurn(key string) (turn func() (heard bool, tok uint64), forget func()) {
	e, forget := w.expect(key)
	turn = func() (bool, uint64) {
		w.hmu.Lock()
		defer w.hmu.Unlock()
		return e.heard, e.last
	}
	return turn, forget
}

// deliver routes one message of the channel.
func (w *Waker) deliver(payload string) {
	key, tok := parseHandoff(payload)
	w.hmu.Lock()
	if e, ok := w.expects[key]; ok {
		e.heard = true
		if tok != 0 {
			e.tok, e.last = tok, tok
		}
	}
	w.hmu.Unlock()
	w.n.Notify(key)
}

func (w *Waker) first(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	if w.run == nil && !w.closed {
		w.run = &listener{w: w, stop: make(chan struct{})}
		w.wg.Add(1)
		go w.run.loop()
	}
}

func (w *Waker) last(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys--
	if w.keys == 0 && w.run != nil && !w.closed {
		w.idle = time.AfterFunc(wakerLinger, w.stopIdle)
	}
}

func (w *Waker) stopIdle() {
	w.mu.Lock()
	if w.keys > 0 || w.run == nil || w.closed {
		w.mu.Unlock()
		return
	}
	r := w.run
	w.run, w.idle = nil, nil
	w.mu.Unlock()
	r.close()
}

// Close stops listening and waits for the subscription's goroutine.
func (w *Waker) Close() {
	w.mu.Lock()
	w.closed = true
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	r := w.run
	w.run = nil
	w.mu.Unlock()
	if r != nil {
		r.close()
	}
	w.wg.Wait()
}

// listener is one run of the subscription loop.
type listener struct {
	w    *Waker
	stop chan struct{}

	mu      sync.Mutex
	ps      *redis.PubSub
	stopped bool
	epoch   uint64 // the Waker's live number while this listener's subscription runs
}

// healthEvery is how long the listener waits for a message before it pings
// the server to find out whether the connection is still alive.
const healthEvery = 30 * time.Second

var reconnect = kit.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}

func (r *listener) loop() {
	defer r.w.wg.Done()
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for fails := 0; ; fails++ {
		ps := r.w.rdb.Subscribe(context.Background(), r.w.channels...)
		if !r.setPubSub(ps) {
			_ = ps.Close()
			return
		}
		if r.receive(ps) {
			fails = 0
		}
		r.unlive()
		_ = ps.Close()
		// Signals may have been missed while the subscription was down.
		r.w.n.NotifyAll()
		timer.Reset(reconnect.Delay(fails))
		select {
		case <-r.stop:
			return
		case <-timer.C:
		}
	}
}

// receive reads messages until ps fails or the listener is closed. It
// reports whether anything was received.
func (r *listener) receive(ps *redis.PubSub) (ok bool) {
	ctx := context.Background()
	pinged, subscribed := false, 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthEvery)
		select {
		case <-r.stop:
			return ok
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Quiet channel: make sure the connection still answers.
				pinged = true
				if ps.Ping(ctx) == nil {
					continue
				}
			}
			r.w.log.Warn("distlock: release signal failed; waiters poll until it is back",
				"channels", r.w.channels, "err", err)
			return ok
		}
		ok, pinged = true, false
		switch m := msg.(type) {
		case *redis.Message:
			r.w.deliver(m.Payload)
		case *redis.Subscription:
			// (Re)subscribed: releases made before now were not seen.
			if m.Kind == "subscribe" {
				if subscribed++; subscribed == len(r.w.channels) {
					r.setLive()
				}
			}
			r.w.n.NotifyAll()
		}
	}
}

// setLive numbers the subscription the server just confirmed on every
// channel and makes it the Waker's live one, unless the listener stopped.
func (r *listener) setLive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.epoch = r.w.subs.Add(1)
		r.w.live.Store(r.epoch)
	}
}

// unlive ends the listener's subscription as the Waker's live one, unless
// a later listener's has taken its place.
func (r *listener) unlive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.live.CompareAndSwap(r.epoch, 0)
}

func (r *listener) setPubSub(ps *redis.PubSub) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.ps = ps
	return true
}

// close stops the loop; the Waker.s WaitGroup sees it exit.
func (r *listener) close() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	r.w.live.CompareAndSwap(r.epoch, 0)
	close(r.stop)
	ps := r.ps
	r.mu.Unlock()
	if ps != nil {
		_ = ps.Close() // unblocks ReceiveTimeout
	}
}
