package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Election is one candidate in a leader election over a core.Locker. Every
// candidate of an election uses a Locker with the same name on the same
// backend. Make it with New and drive it with Run.
type Election struct {
	locker core.Locker
	insp   core.Inspector // nil when the Locker cannot report its holder
	cfg    Config

	mu       sync.Mutex
	running  bool
	term     uint64          // current term, 0 when not leading
	termCtx  context.Context // current term's context, nil when not leading
	endTerm  context.CancelCauseFunc
	termDone chan struct{} // closed once the current term has fully ended
	seen     string        // last leader reported to OnNewLeader

	emitMu sync.Mutex // keeps events and OnNewLeader calls in order
}

// New returns a candidate that campaigns for locker. It does no I/O. It
// returns an error matching core.ErrInvalidArgument for a nil locker or a
// broken Config, and one matching core.ErrInvalidName when the locker's name
// is not valid.
func New(locker core.Locker, cfg Config) (*Election, error) {
	if locker == nil {
		return nil, kit.Invalid("election: nil Locker")
	}
	if err := kit.ValidateName(locker.Name()); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Election{locker: locker, cfg: cfg}
	e.insp, _ = locker.(core.Inspector)
	return e, nil
}

// Name returns the election's name: the Locker's.
func (e *Election) Name() string { return e.locker.Name() }

// ID returns this candidate's ID.
func (e *Election) ID() string { return e.cfg.ID }

// IsLeader reports whether this candidate leads now: it has won a term that
// has not ended. It does no I/O. It reads the Clock: once the lock's trust
// window has closed (the handle's lease deadline has passed unrenewed) it
// reports false, and ends the term, even when no timer has fired yet, as
// right after the process was frozen. Within the window, a leader that
// has lost the lock without knowing yet still reports true: that is what
// the fencing token (Term) is for.
func (e *Election) IsLeader() bool {
	_, ok := e.current()
	return ok
}

// Term returns the current term while this candidate leads (as IsLeader
// judges it), else 0. The term is the lock's fencing token: pass it to the
// resources the leader writes so they can refuse a deposed leader.
func (e *Election) Term() uint64 {
	term, _ := e.current()
	return term
}

// current returns the current term and true while it has not ended.
func (e *Election) current() (uint64, bool) {
	e.mu.Lock()
	term, ctx := e.term, e.termCtx
	e.mu.Unlock()
	// Outside e.mu: the term context's check may end the term.
	if ctx == nil || ctx.Err() != nil {
		return 0, false
	}
	return term, true
}

// Leader reports who leads the election now, as the backend sees it, in one
// round trip. It returns an error matching ErrNoLeader when nobody does, and
// one matching core.ErrUnsupported when the Locker does not implement
// core.Inspector.
func (e *Election) Leader(ctx context.Context) (core.Holder, error) {
	if e.insp == nil {
		return core.Holder{}, fmt.Errorf("election %q: %w: the Locker cannot report its holder", e.Name(), core.ErrUnsupported)
	}
	h, held, err := e.insp.Holder(ctx)
	switch {
	case err != nil:
		return core.Holder{}, fmt.Errorf("election %q: leader: %w", e.Name(), err)
	case !held:
		return core.Holder{}, fmt.Errorf("election %q: %w", e.Name(), ErrNoLeader)
	}
	return h, nil
}

// Resign ends this candidate's term, if it leads: OnPromote's context is
// cancelled with cause ErrResigned, and once OnPromote has returned and
// OnDemote has run the lock is released, so a waiting follower takes over
// in about one round trip. Resign waits for all of that or for ctx. The
// candidate keeps running, and campaigns again after ResignDelay. Resign
// does nothing and returns nil when the candidate does not lead.
//
// A leader can step down from inside OnPromote by calling Resign with
// OnPromote's context (or one derived from it): Resign then ends the term
// and returns at once, and the rest happens once OnPromote returns. Called
// from OnPromote or OnDemote with any other context, Resign waits until that
// context ends.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	end, done := e.endTerm, e.termDone
	e.mu.Unlock()
	if end == nil {
		return nil
	}
	end(ErrResigned)
	if ctx.Value(termKey{}) == e {
		// Called from OnPromote, which must return before the term can
		// end: waiting here would wait for ourselves.
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("election %q: resign: %w", e.Name(), ctx.Err())
	}
}

// Run campaigns, leads when elected and campaigns again after each term,
// until ctx is done. A term ends when the lock is lost, on Resign, when the
// health check fails, or when ctx ends; Run then waits for OnPromote to
// return, calls OnDemote and releases the lock before going on, so Run
// returns only after the lock is given up.
//
// Run returns nil once ctx is done. It returns early with an error that is
// permanent: the Locker reporting core.ErrInvalidName,
// core.ErrInvalidArgument or core.ErrUnsupported, or Run already running on
// this Election. Store errors are not permanent: Run retries them after
// RetryBackoff, reporting each as a CampaignFailed event.
func (e *Election) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return fmt.Errorf("election %q: Run is already running", e.Name())
	}
	e.running = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	failures := 0
	for ctx.Err() == nil {
		if err := e.checkHealth(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			e.campaignFailed(err)
			e.sleep(ctx, e.cfg.HealthInterval)
			continue
		}
		h, err := e.campaign(ctx)
		switch {
		case ctx.Err() != nil:
			if h != nil {
				// A grant Run no longer wants; give it straight back.
				_ = e.release(ctx, h)
			}
			return nil
		case err == nil:
			failures = 0
			if cause := e.lead(ctx, h); errors.Is(cause, ErrResigned) {
				e.sleep(ctx, e.cfg.ResignDelay)
			}
		case errors.Is(err, core.ErrNotAcquired):
			// A campaign round ended without the lock: campaign again.
			// Rounds end on their own only when the health check bounds
			// them; pause in case the Locker's Acquire gives up by itself.
			if e.cfg.HealthCheck == nil {
				e.sleep(ctx, e.cfg.RetryBackoff.Delay(0))
			}
		case errors.Is(err, core.ErrInvalidName), errors.Is(err, core.ErrInvalidArgument), errors.Is(err, core.ErrUnsupported):
			return fmt.Errorf("election %q: %w", e.Name(), err)
		default:
			e.campaignFailed(err)
			e.sleep(ctx, e.cfg.RetryBackoff.Delay(failures))
			failures++
		}
	}
	return nil
}

// campaign makes one campaign round: it returns a handle when elected, an
// error matching core.ErrNotAcquired when the round ended without the lock
// (so that the health check runs again), or the store's error.
func (e *Election) campaign(ctx context.Context) (core.Handle, error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if e.cfg.HealthCheck != nil {
		// Bound the round so that a follower that turns unhealthy while
		// waiting stops campaigning.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.sleep(ctx, e.cfg.HealthInterval) {
				cancel()
			}
		}()
	}
	if e.insp != nil && (e.cfg.OnNewLeader != nil || e.cfg.OnEvent != nil) {
		obsCtx, stop := context.WithCancel(ctx)
		defer stop()
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.observe(obsCtx)
		}()
	}
	if e.cfg.Priority == 0 {
		return e.locker.Acquire(ctx)
	}
	return e.campaignDeferred(ctx)
}

// campaignDeferred is the campaign of a candidate with a priority below the
// best: it lets the lock sit free for its delay before trying, so that a
// preferred candidate, which waits in Acquire and wakes on the release, gets
// it first.
func (e *Election) campaignDeferred(ctx context.Context) (core.Handle, error) {
	delay := time.Duration(e.cfg.Priority) * e.cfg.PriorityDelay
	for {
		if e.insp != nil {
			_, held, err := e.insp.Holder(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil, kit.NotAcquired(ctx)
				}
				return nil, err
			}
			if held {
				if !e.sleep(ctx, kit.Backoff{Min: delay, Max: delay}.Delay(0)) {
					return nil, kit.NotAcquired(ctx)
				}
				continue
			}
		}
		if !e.sleep(ctx, delay) {
			return nil, kit.NotAcquired(ctx)
		}
		h, err := e.locker.TryAcquire(ctx)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) {
			return h, err
		}
	}
}

// observe reports the leader a follower sees, until ctx is done.
func (e *Election) observe(ctx context.Context) {
	for {
		h, held, err := e.insp.Holder(ctx)
		// This candidate's own grant is reported by lead, after Promoted;
		// the observer can see it first, while the campaign returns.
		if err == nil && held && h.ID != "" && h.ID != e.cfg.ID {
			e.noteLeader(h.ID, e.cfg.Clock.Now())
		}
		if !e.sleep(ctx, e.cfg.ObserveInterval) {
			return
		}
	}
}

// lead runs one term on h and returns why it ended.
func (e *Election) lead(ctx context.Context, h core.Handle) error {
	term := h.FencingToken()
	termCtx, end := e.termContext(ctx, h)
	stopWatch := context.AfterFunc(h.Context(), func() { end(context.Cause(h.Context())) })
	done := make(chan struct{})
	e.mu.Lock()
	e.term, e.termCtx, e.endTerm, e.termDone = term, termCtx, end, done
	e.mu.Unlock()

	now := e.cfg.Clock.Now()
	e.emit(Event{Kind: Promoted, Term: term, Leader: e.cfg.ID, Time: now}, func(m Metrics) {
		m.SetLeader(e.Name(), true)
		m.Transition(e.Name(), Promoted, term)
	})
	e.noteLeader(e.cfg.ID, now)

	work := make(chan struct{})
	go func() {
		defer close(work)
		e.cfg.OnPromote(termCtx, term)
	}()
	e.watchHealth(termCtx, end)
	cause := context.Cause(termCtx)
	<-work
	if e.cfg.OnDemote != nil {
		e.cfg.OnDemote()
	}
	stopWatch()
	end(nil)
	// Report the demotion before the release, so that no follower can be
	// promoted before this candidate's Demoted event and leader gauge.
	e.emit(Event{Kind: Demoted, Term: term, Err: cause, Time: e.cfg.Clock.Now()}, func(m Metrics) {
		m.SetLeader(e.Name(), false)
		m.Transition(e.Name(), Demoted, term)
	})
	if err := e.release(ctx, h); err != nil {
		e.emit(Event{Kind: ReleaseFailed, Term: term, Err: err, Time: e.cfg.Clock.Now()}, func(Metrics) {})
	}
	e.mu.Lock()
	e.term, e.termCtx, e.endTerm, e.termDone = 0, nil, nil, nil
	e.mu.Unlock()
	close(done)
	return cause
}

// termContext returns the context of a term held through h, and its end.
// The context ends with h's, and its Err and Done end it on the spot once
// h is no longer held by the Clock (core.HeldAt): a lease whose trust
// window has closed ends the term at the first check, before the timers
// that would report the loss have fired.
func (e *Election) termContext(ctx context.Context, h core.Handle) (context.Context, context.CancelCauseFunc) {
	termCtx, end := context.WithCancelCause(context.WithValue(ctx, termKey{}, e))
	check := func() {
		if core.HeldAt(h, e.cfg.Clock.Now()) {
			return
		}
		cause := context.Cause(h.Context())
		if cause == nil {
			cause = fmt.Errorf("%w: the lease's trust window closed", core.ErrLockLost)
		}
		end(cause)
	}
	return kit.WithCheck(termCtx, check), end
}

// release gives h up, with a bounded context of its own when ctx is done.
func (e *Election) release(ctx context.Context, h core.Handle) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := h.Release(rctx); err != nil {
		return fmt.Errorf("election %q: release: %w", e.Name(), err)
	}
	return nil
}

// watchHealth waits for the term to end, ending it itself when the health
// check fails.
func (e *Election) watchHealth(termCtx context.Context, end context.CancelCauseFunc) {
	if e.cfg.HealthCheck == nil {
		<-termCtx.Done()
		return
	}
	for e.sleep(termCtx, e.cfg.HealthInterval) {
		if err := e.checkHealth(termCtx); err != nil {
			end(err)
			return
		}
	}
}

// checkHealth runs the health check; the error matches ErrUnhealthy.
func (e *Election) checkHealth(ctx context.Context) error {
	if e.cfg.HealthCheck == nil {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, e.cfg.HealthInterval)
	defer cancel()
	if err := e.cfg.HealthCheck(hctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnhealthy, err)
	}
	return nil
}

func (e *Election) campaignFailed(err error) {
	e.emit(Event{Kind: CampaignFailed, Err: err, Time: e.cfg.Clock.Now()}, func(m Metrics) {
		m.CampaignFailed(e.Name(), err)
	})
}

// noteLeader reports id to OnNewLeader and as a LeaderChanged event when it
// differs from the last leader seen.
func (e *Election) noteLeader(id string, at time.Time) {
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	e.mu.Lock()
	changed := e.seen != id
	e.seen = id
	e.mu.Unlock()
	if !changed {
		return
	}
	ev := Event{Kind: LeaderChanged, Election: e.Name(), ID: e.cfg.ID, Leader: id, Time: at}
	e.log(ev)
	if e.cfg.OnEvent != nil {
		e.cfg.OnEvent(ev)
	}
	if e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(id)
	}
}

func (e *Election) emit(ev Event, metrics func(Metrics)) {
	ev.Election, ev.ID = e.Name(), e.cfg.ID
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	if e.cfg.Metrics != nil {
		metrics(e.cfg.Metrics)
	}
	e.log(ev)
	if e.cfg.OnEvent != nil {
		e.cfg.OnEvent(ev)
	}
}

// termKey marks the contexts OnPromote runs under, with the Election as
// value.
type termKey struct{}

// sleep waits for d or ctx, and reports whether the full d passed.
func (e *Election) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-e.cfg.Clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
