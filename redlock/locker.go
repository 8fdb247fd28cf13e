package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// locker is every primitive: the Lock says which.
type locker struct {
	p    *Provider
	lock redisop.Lock
}

type rwLocker struct {
	*locker
	read *locker
}

func (l *rwLocker) RLocker() core.Locker { return l.read }

func (p *Provider) locker(lock redisop.Lock) core.Locker {
	if err := lock.Validate(); err != nil {
		return kit.FailedLocker(lock.Name, kit.Wrap(backend, "acquire", lock.Name, err))
	}
	l := &locker{p: p, lock: p.prepare(lock)}
	if lock.Kind == redisop.KindSemaphore {
		return p.probe.Semaphore(l)
	}
	return p.probe.Mutex(inspected{l})
}

func (l *locker) Name() string { return l.lock.Name }

// TryAcquire makes one attempt on every server in parallel and does not
// wait for a busy lock. It fails with an error matching core.ErrNotAcquired
// when the lock is held, and with the servers' errors (each naming its
// server) when a majority cannot be reached.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, kit.NotAcquired(ctx))
	}
	c := newCalls(l.p, redisop.Grant{Lock: l.lock, Owner: redisop.NewTaggedOwner(l.p.idTag)}, false)
	h, _, err := l.try(ctx, c, 0, 0)
	if err != nil {
		c.giveUp()
	}
	return h, err
}

// Acquire waits until a majority grants the lock or ctx is done. A mutex
// waiter lines up on every server by its ticket and is handed the lock by
// the release that makes it first (see the package doc, Waiting); a writer
// wakes on the release announcements of every server. Both otherwise retry
// with jittered backoff, never later than the holder's grant expires. When
// a majority cannot be reached it fails at once with the servers' errors.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, kit.NotAcquired(ctx))
	}
	// Only the first local waiter for a lock contends on the servers: a
	// crowd of contenders would split the votes so that nobody wins a
	// majority.
	key := l.p.servers[0].client.WakeKey(l.lock)
	leave, err := l.p.gates.Enter(ctx, key)
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, err)
	}
	defer leave()
	owner := redisop.NewTaggedOwner(l.p.idTag)
	// How long a waiting writer's marker, or a waiting mutex acquire's
	// place in the servers' queues, lives between tries. A mutex waiter
	// lines up on every server under one ticket (AcquireCounted), so that
	// every server owes the lock to the same first waiter.
	wait := max(time.Second, 3*l.p.cfg.backoff.Max)
	ticket := uint64(time.Now().UnixMicro())
	c := newCalls(l.p, redisop.Grant{Lock: l.lock, Owner: owner}, true)
	handoff := l.p.servers[0].client.HandoffKey(l.lock, owner)
	if l.lock.Kind == redisop.KindMutex {
		// A release hands a mutex waiter the lock, or announces its turn.
		c.turn = l.p.expectTurn(handoff)
		defer c.turn.forget()
	}
	h, retryIn, err := l.try(ctx, c, wait, ticket)
	if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
		if err != nil {
			c.giveUp()
		}
		return h, err
	}
	// A release hands a mutex to the first waiter alone (AcquireCounted),
	// announced by its handoff key; the lock's own key wakes every waiter.
	wake, stop := l.p.subscribe(key, handoff)
	defer stop()
	// A mutex waiter is handed the lock on its inbox when its turn comes
	// (handover.go): its retries only cover a lost announcement, and start
	// at mutexPollMin. One
	// whose first try found the lock held (retryIn > 0: the holder's
	// remaining lease) waits for its turn without trying again when no
	// server announced it since before that try, and every server's
	// subscription ran throughout (an announcement then reached its
	// waker). Otherwise, and for a writer, kit.Wait tries again at once
	// after it subscribed, which covers a release between the first try
	// and the subscription.
	b := l.p.cfg.backoff
	skip := false
	if l.lock.Kind == redisop.KindMutex {
		b, skip = b.AtLeast(mutexPollMin), retryIn > 0 && c.turn.unheard(l.p)
	}
	if f := onWait.Load(); f != nil {
		(*f)(l.lock.Name, skip)
	}
	h, err = kit.Wait(ctx, b, wake, l.retry(c, wait, ticket, skip, retryIn))
	if err != nil {
		c.giveUp()
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, err)
	}
	return h, nil
}

// mutexPollMin is the least first delay of a mutex waiter's fallback
// retries. Each retry is a script on every server, and with many waiters
// they cost more than they save: with 32 waiting processes and a 20 ms
// start, a grant cost 6.3 scripts on each server against 4.2 with 8
// (BENCHMARKS.md, 2026-11-27). A waiter whose wake-up was lost waits
// 50 to 100 ms more.
const mutexPollMin = 100 * time.Millisecond

// try is one attempt: the acquire script on every server without a call
// of the owner in flight, in parallel, decided as soon as a majority
// granted or can no longer grant.
func (l *locker) try(ctx context.Context, c *calls, wait time.Duration, ticket uint64) (core.Handle, time.Duration, error) {
	p := l.p
	start := time.Now()
	// The calls run to their end even when the caller gives up: a call cut
	// short may still land its grant, and only a finished call can be
	// answered with a release.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.budget())
	send, skipped := c.claim()
	replies := eachOf(p, actx, send, func(ctx context.Context, s server) (redisop.Result, error) {
		return s.client.AcquireCounted(ctx, l.lock, c.g.Owner, p.cfg.ttl, wait, p.cfg.guard, ticket)
	})
	t := p.count(ctx, actx, replies, skipped)
	late := len(p.servers) - skipped - t.answered
	if len(t.granted) >= p.quorum && time.Since(start) < p.cfg.budget() && ctx.Err() == nil {
		token, err := p.fence(actx, l.lock, t.granted)
		if err == nil {
			h := p.hold(c, token, start, t)
			c.follow(replies, late, cancel)
			return h, 0, nil
		}
		t.slow = append(t.slow, err)
	}
	if wait > 0 && ctx.Err() == nil {
		p.drain(ctx, actx, t, replies)
		late = len(p.servers) - skipped - t.answered
	}
	c.answered(start, t)
	p.abandon(c, t)
	c.follow(replies, late, cancel)
	retryIn, err := p.failure(ctx, t)
	return nil, retryIn, kit.Wrap(backend, "acquire", l.lock.Name, err)
}

// tally is the servers' answers to one acquire attempt, as far as they
// arrived.
type tally struct {
	granted  map[int]uint64 // server → its counter
	refused  int
	refusers []int   // the servers that refused
	young    int     // granted by a server whose data set is younger than the guard
	hard     []error // the server could not be asked: down, refusing connections
	slow     []error // no answer within the budget
	skipped  int     // not asked: an earlier call of the owner is still due there
	retryIn  time.Duration
	answered int
	known    []bool   // the server's reply has arrived
	mayHold  []bool   // the server granted, or failed after its call may have run
	reached  []bool   // the server answered, busy or granted, and is not young
	counter  []uint64 // the name's counter in its answer (Result.Counter, or the token)
}

func (t *tally) failed() int {
	return t.refused + t.young + len(t.hard) + len(t.slow) + t.skipped
}

// add counts one server's reply; late says the attempt's budget ran out
// before the reply came.
func (t *tally) add(r reply[redisop.Result], late bool) {
	t.answered++
	t.known[r.i] = true
	t.mayHold[r.i] = r.err != nil || r.v.Acquired
	if r.err == nil && r.v.Young == 0 {
		// A young server's counter may be behind the tokens it handed
		// out before it lost its data: no baseline for handovers.
		t.reached[r.i], t.counter[r.i] = true, max(r.v.Counter, r.v.Token)
	}
	switch {
	case r.err != nil && late:
		t.slow = append(t.slow, r.err)
	case r.err != nil:
		t.hard = append(t.hard, r.err)
	case r.v.Acquired && r.v.Young > 0:
		// The server may have lost a grant that its holder still counts:
		// it counts for nobody until every such grant has expired. Its
		// grant stays, extended and released with the others.
		t.young++
		t.wait(r.v.Young)
	case r.v.Acquired:
		t.granted[r.i] = r.v.Token
	default:
		t.refused++
		t.refusers = append(t.refusers, r.i)
		t.wait(r.v.RetryIn)
	}
}

// wait lowers the retry hint to d when d is known and shorter.
func (t *tally) wait(d time.Duration) {
	if t.retryIn == 0 || (d > 0 && d < t.retryIn) {
		t.retryIn = d
	}
}

// count reads the replies of one attempt, whose calls run under actx and
// which skipped some servers, until a majority granted, a majority can no
// longer grant, every server asked answered or ctx ends.
func (p *Provider) count(ctx, actx context.Context, replies <-chan reply[redisop.Result], skipped int) *tally {
	n := len(p.servers)
	t := &tally{granted: make(map[int]uint64, n), known: make([]bool, n), mayHold: make([]bool, n),
		reached: make([]bool, n), counter: make([]uint64, n), skipped: skipped}
	for t.answered+skipped < n && len(t.granted) < p.quorum && t.failed() <= n-p.quorum && ctx.Err() == nil {
		var r reply[redisop.Result]
		select {
		case r = <-replies:
		case <-ctx.Done():
			continue
		}
		t.add(r, actx.Err() != nil && ctx.Err() == nil)
	}
	return t
}

// drain reads the replies still due of a failed try that will be followed
// by another, up to releaseGrace or the end of ctx: from healthy servers
// they are a round trip away, and a server whose call is still due when
// the next try starts is not asked in it.
func (p *Provider) drain(ctx, actx context.Context, t *tally, replies <-chan reply[redisop.Result]) {
	grace := time.NewTimer(releaseGrace)
	defer grace.Stop()
	for t.answered+t.skipped < len(p.servers) {
		select {
		case r := <-replies:
			t.add(r, actx.Err() != nil)
		case <-grace.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hold returns the handle of c's grant, granted by a majority with token.
// The servers that had not answered yet, in this try or an earlier one,
// pass their replies to the handle's release as they arrive (calls.follow,
// stragglers). When the attempt queued (a mutex waiter), the servers that
// refused it take it out of their queues, where it would hold the next
// waiters back.
func (p *Provider) hold(c *calls, token uint64, start time.Time, t *tally) *handle {
	if c.inLine() {
		for _, i := range t.refusers {
			p.leaveQueue(c.g, i)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase = won
	for i, k := range t.known {
		switch {
		case k:
			c.due[i] = false
		case !c.due[i]:
			// Skipped by this try, and its last call has answered
			// since (or failed): nothing of the owner is on its way
			// there, so the release goes there at once.
			t.known[i] = true
			if c.inLine() && !c.mayHold[i] {
				p.leaveQueue(c.g, i)
			}
		}
	}
	var st *stragglers
	if slices.Contains(t.known, false) {
		st = &stragglers{known: t.known}
	}
	c.st = st
	return p.newHandle(c.g, token, start, st)
}

// leaveQueue takes g's owner out of server i's wait queue, in the
// background.
func (p *Provider) leaveQueue(g redisop.Grant, i int) {
	s := p.servers[i]
	p.background(func(ctx context.Context) { _ = s.client.Withdraw(ctx, g) })
}

// abandon ends a failed try. The servers that answered with a grant, or
// with an error after which they may hold one, give it back now, so that
// contenders that split the votes free them for the next try; it waits
// for those give-backs, up to releaseGrace. The try's calls still due are
// left running, and each is dealt with when it lands (calls.landed).
func (p *Provider) abandon(c *calls, t *tally) {
	notify := make(chan struct{}, len(p.servers))
	sent := 0
	c.mu.Lock()
	for i, k := range t.known {
		if !k {
			continue
		}
		c.due[i] = false
		if c.mayHold[i] = c.mayHold[i] || t.mayHold[i]; c.mayHold[i] {
			c.releaseLocked(i, notify)
			sent++
		}
	}
	c.mu.Unlock()
	grace := time.NewTimer(releaseGrace)
	defer grace.Stop()
	for range sent {
		select {
		case <-notify:
		case <-grace.C:
			return
		}
	}
}

// failure says why an attempt failed, and how long it is worth waiting
// before the next (0 when waiting will not help or is over).
func (p *Provider) failure(ctx context.Context, t *tally) (time.Duration, error) {
	n := len(p.servers)
	switch {
	case ctx.Err() != nil:
		return 0, kit.NotAcquired(ctx)
	case len(t.hard) > n-p.quorum:
		// A majority cannot even be asked: waiting will not help.
		return 0, fmt.Errorf("%d of %d servers unreachable, %d needed: %w",
			len(t.hard), n, p.quorum, errors.Join(t.hard...))
	}
	why := fmt.Sprintf("granted by %d of %d servers, %d needed (%d held by another owner, %d too young to count",
		len(t.granted), n, p.quorum, t.refused, t.young)
	if t.skipped > 0 {
		why += fmt.Sprintf(", %d not asked: still answering an earlier call", t.skipped)
	}
	if errs := append(t.hard, t.slow...); len(errs) > 0 {
		why += fmt.Sprintf(", %d failed: %v", len(errs), errors.Join(errs...))
	}
	return t.retryIn, kit.Busy("%s)", why)
}

// fence turns the granting servers' counters into the grant's token: the
// largest, written back to the granting servers that had less until a
// majority holds at least that value.
func (p *Provider) fence(ctx context.Context, lock redisop.Lock, granted map[int]uint64) (uint64, error) {
	var token uint64
	for _, v := range granted {
		token = max(token, v)
	}
	var behind []int
	for i, v := range granted {
		if v < token {
			behind = append(behind, i)
		}
	}
	need := p.quorum - (len(granted) - len(behind))
	if need <= 0 {
		return token, nil
	}
	slices.Sort(behind)
	out := make(chan error, len(behind))
	for _, i := range behind {
		s := p.servers[i]
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			if err := s.client.RaiseCounter(ctx, lock, token); err != nil {
				out <- fmt.Errorf("%s: %w", s.name, err)
				return
			}
			out <- nil
		}()
	}
	var errs []error
	for range behind {
		if err := <-out; err != nil {
			errs = append(errs, err)
		} else if need--; need == 0 {
			return token, nil
		}
	}
	return 0, fmt.Errorf("fencing token %d written back to too few servers: %w", token, errors.Join(errs...))
}

// onWait, set by tests, is told before a waiting Acquire's wait whether
// it skips the try at once after subscribing.
var onWait atomic.Pointer[func(name string, skip bool)]

// errHeldElsewhere is why a mutex waiter that queued and was not
// announced its turn waits without trying again.
var errHeldElsewhere = kit.Busy("held by another owner; waiting for the turn to be announced")

// turnHeard is a waiter's ExpectTurn on every server, and the servers'
// subscriptions when it registered.
type turnHeard struct {
	turns   []func() (bool, uint64)
	forgets []func()
	live    []uint64 // each waker's Listening
}

// expectTurn registers the waiter with handoff key handoff on every
// server's waker, before the try that queues it.
func (p *Provider) expectTurn(handoff string) *turnHeard {
	t := &turnHeard{}
	for _, s := range p.servers {
		h, f := s.waker.ExpectTurn(handoff)
		t.turns, t.forgets = append(t.turns, h), append(t.forgets, f)
		t.live = append(t.live, s.waker.Listening())
	}
	return t
}

// unheard reports that no server announced the turn since expectTurn,
// and that none could have unheard: every server's subscription ran
// throughout, so each announcement reached its waker.
func (t *turnHeard) unheard(p *Provider) bool {
	for i, s := range p.servers {
		if heard, _ := t.turns[i](); heard || t.live[i] == 0 || s.waker.Listening() != t.live[i] {
			return false
		}
	}
	return true
}

func (t *turnHeard) forget() {
	for _, f := range t.forgets {
		f()
	}
}

// subscribe merges the release announcements of every server for keys.
func (p *Provider) subscribe(keys ...string) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var stops []func()
	for _, key := range keys {
		for _, s := range p.servers {
			ch, stop := s.waker.Subscribe(key)
			stops = append(stops, stop)
			p.bg.Add(1)
			go func() {
				defer p.bg.Done()
				for {
					select {
					case <-ch:
						select {
						case out <- struct{}{}:
						default:
						}
					case <-done:
						return
					}
				}
			}()
		}
	}
	return out, func() {
		close(done)
		for _, stop := range stops {
			stop()
		}
	}
}

// stragglers tracks, for a grant decided before every server answered,
// which servers' acquire replies have arrived. A release is sent to a
// server only after its acquire reply arrived, so that it runs after the
// grant there: a release sent before could pass the grant on its way and
// find nothing, and the grant would stay until it expired.
type stragglers struct {
	mu    sync.Mutex
	known []bool
	send  func(i int, mayHold bool) // set once the release started
}

// arrived records server i's late reply, mayHold saying whether its call
// may have granted, and passes it to the release when that has started.
func (s *stragglers) arrived(i int, mayHold bool) {
	s.mu.Lock()
	s.known[i] = true
	send := s.send
	s.mu.Unlock()
	if send != nil {
		send(i, mayHold)
	}
}

// release marks the release as started, with send for the servers whose
// replies arrive from now on, and returns which servers had answered by
// then: the release is sent to those at once.
func (s *stragglers) release(send func(i int, mayHold bool)) []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send = send
	return slices.Clone(s.known)
}
