package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	h, _, err := l.try(ctx, redisop.NewTaggedOwner(l.p.idTag), 0, 0)
	return h, err
}

// Acquire waits until a majority grants the lock or ctx is done. A mutex
// waiter lines up on every server by its ticket and is woken by the
// release that makes it first (see the package doc, Waiting); a writer
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
	h, _, err := l.try(ctx, owner, wait, ticket)
	if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
		l.gaveUp(owner, err)
		return h, err
	}
	// A release wakes the first waiter alone (AcquireCounted), by its
	// handoff key; the lock's own key wakes every waiter.
	wake, stop := l.p.subscribe(key, l.p.servers[0].client.HandoffKey(l.lock, owner))
	defer stop()
	h, err = kit.Wait(ctx, l.p.cfg.backoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		return l.try(ctx, owner, wait, ticket)
	})
	if err != nil {
		l.gaveUp(owner, err)
		return nil, kit.Wrap(backend, "acquire", l.lock.Name, err)
	}
	return h, nil
}

// gaveUp withdraws a waiting writer's marker, or a waiting mutex acquire's
// place in line, from every server, and returns as a Release does (see
// awaitRelease): a place left in line on a majority would keep the lock
// from the next caller though it is free, and a server that stopped
// answering delays the return by a short grace only.
func (l *locker) gaveUp(owner string, err error) {
	if err == nil || (l.lock.Kind != redisop.KindWrite && l.lock.Kind != redisop.KindMutex) {
		return
	}
	p, g := l.p, redisop.Grant{Lock: l.lock, Owner: owner}
	start := time.Now()
	replies := make(chan reply[bool], len(p.servers))
	all := make([]bool, len(p.servers))
	for i, s := range p.servers {
		all[i] = true
		p.work.run(func() {
			ctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
			defer cancel()
			replies <- reply[bool]{i: i, err: s.client.Withdraw(ctx, g)}
		})
	}
	_ = p.awaitRelease(g, start, all, replies)
}

// try is one attempt: the acquire script on every server in parallel,
// decided as soon as a majority granted or can no longer grant.
func (l *locker) try(ctx context.Context, owner string, wait time.Duration, ticket uint64) (core.Handle, time.Duration, error) {
	p := l.p
	start := time.Now()
	g := redisop.Grant{Lock: l.lock, Owner: owner}
	// The calls run to their end even when the caller gives up: a call cut
	// short may still land its grant, and only a finished call can be
	// answered with a release.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.budget())
	replies := each(p, actx, func(ctx context.Context, s server) (redisop.Result, error) {
		return s.client.AcquireCounted(ctx, l.lock, owner, p.cfg.ttl, wait, p.cfg.guard, ticket)
	})
	t := p.count(ctx, actx, replies)
	if len(t.granted) >= p.quorum && time.Since(start) < p.cfg.budget() && ctx.Err() == nil {
		token, err := p.fence(actx, l.lock, t.granted)
		if err == nil {
			queued := wait > 0 && l.lock.Kind == redisop.KindMutex
			return p.hold(g, token, start, t, replies, cancel, queued), 0, nil
		}
		t.slow = append(t.slow, err)
	}
	cancel()
	p.abandon(g, t, replies)
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
	retryIn  time.Duration
	answered int
	known    []bool // the server's reply has arrived
}

func (t *tally) failed() int { return t.refused + t.young + len(t.hard) + len(t.slow) }

// add counts one server's reply; late says the attempt's budget ran out
// before the reply came.
func (t *tally) add(r reply[redisop.Result], late bool) {
	t.answered++
	t.known[r.i] = true
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

// count reads the replies of one attempt, whose calls run under actx,
// until a majority granted, a majority can no longer grant, every server
// answered or ctx ends.
func (p *Provider) count(ctx, actx context.Context, replies <-chan reply[redisop.Result]) *tally {
	n := len(p.servers)
	t := &tally{granted: make(map[int]uint64, n), known: make([]bool, n)}
	for t.answered < n && len(t.granted) < p.quorum && t.failed() <= n-p.quorum && ctx.Err() == nil {
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

// hold returns the handle of g, granted by a majority with token. The
// servers that had not answered yet are read in the background, and cancel,
// which ends the attempt's calls, is called once all have answered. When
// the attempt queued (a mutex waiter), the servers that refused it take it
// out of their queues, where it would hold the next waiters back.
func (p *Provider) hold(g redisop.Grant, token uint64, start time.Time, t *tally, replies <-chan reply[redisop.Result], cancel context.CancelFunc, queued bool) *handle {
	if queued {
		for _, i := range t.refusers {
			p.leaveQueue(g, i)
		}
	}
	late := len(p.servers) - t.answered
	if late == 0 {
		cancel()
		return p.newHandle(g, token, start, nil)
	}
	st := &stragglers{known: t.known}
	h := p.newHandle(g, token, start, st)
	p.bg.Add(1)
	go func() {
		// A late grant is extended and released with the others; a
		// release that started before it landed is sent to its server
		// now (stragglers).
		defer p.bg.Done()
		defer cancel()
		for range late {
			r := <-replies
			st.arrived(r.i, r.err != nil || r.v.Acquired)
			if queued && r.err == nil && !r.v.Acquired {
				p.leaveQueue(g, r.i)
			}
		}
	}()
	return h
}

// leaveQueue takes g's owner out of server i's wait queue, in the
// background.
func (p *Provider) leaveQueue(g redisop.Grant, i int) {
	s := p.servers[i]
	p.background(func(ctx context.Context) { _ = s.client.Withdraw(ctx, g) })
}

// abandon ends a failed attempt: it waits for the replies still due and,
// when some call may have granted, gives g back before the next try. The
// owner value is the same across the tries of one Acquire, so a give-back
// left running could delete the next try's grants.
func (p *Provider) abandon(g redisop.Grant, t *tally, replies <-chan reply[redisop.Result]) {
	maybe := len(t.granted) > 0 || t.young > 0 || len(t.hard) > 0 || len(t.slow) > 0 // an errored call may have run
	for ; t.answered < len(p.servers); t.answered++ {
		if r := <-replies; r.err != nil || r.v.Acquired {
			maybe = true
		}
	}
	if maybe {
		p.giveBack(g)
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
	if errs := append(t.hard, t.slow...); len(errs) > 0 {
		why += fmt.Sprintf(", %d failed: %v", len(errs), errors.Join(errs...))
	}
	return t.retryIn, kit.Busy("%s)", why)
}

// giveBack releases g on every server and waits for all of them (up to
// kit.CleanupTimeout): the next try of the same Acquire reuses the owner value,
// so no release of this one may still be on its way.
func (p *Provider) giveBack(g redisop.Grant) {
	ctx, cancel := context.WithTimeout(p.bgCtx, kit.CleanupTimeout)
	defer cancel()
	replies := each(p, ctx, func(ctx context.Context, s server) (bool, error) {
		return s.client.Release(ctx, g)
	})
	for range p.servers {
		<-replies
	}
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
