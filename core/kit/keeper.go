package kit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
)

// KeeperConfig configures a Keeper.
type KeeperConfig struct {
	// TTL is how long the backend keeps a lease it was last told about. Zero
	// means leases never expire on their own (a file lock, say): the Keeper
	// then only runs Renew as a periodic check and never closes a trust
	// window.
	TTL time.Duration
	// Interval is the renewal cadence. Default TTL/3.
	Interval time.Duration
	// Margin is subtracted from the TTL to allow for clock drift and the
	// latency of the renewal itself: a lease is trusted until the start of
	// its last successful renewal (or of the acquire) + TTL − Margin. Zero
	// is a valid margin; backends choose their default (TTL/10 is common).
	Margin time.Duration
	// Renew renews a batch of leases in as few round trips as the backend
	// allows and returns one error per lease, in order: nil when renewed, an
	// error matching ErrLockLost when the backend says the lease is gone or
	// taken (the handle is lost at once), any other error when the outcome is
	// unknown (the Keeper retries until the trust window closes). ctx ends
	// when the latest trust window of the batch closes: each lease is
	// judged against its own window, lost when it closes before the answer
	// comes, so a lease near the end of its window does not cut short the
	// renewal of the others. A call that overruns every window is not
	// waited for, so Renew may be called again while it still runs.
	Renew func(ctx context.Context, batch []*Lease) []error
	// Clock drives the cadence and judges the trust windows; the
	// starts passed to Keep are on it. Default SystemClock; tests
	// substitute a fake. The context given to Renew is bounded in real
	// time, since Renew waits on real I/O.
	Clock Clock
}

// Keeper renews the leases of many handles from one goroutine, batching the
// renewals that fall due together so that a thousand held locks cost a few
// round trips per interval, not a thousand. It cancels a handle's context with
// ErrLockLost when a renewal says the lease is gone or when the trust window
// closes without a successful renewal.
//
// Each renewal's outcome is also recorded in the handle, which reports it as
// a LeaseReporter: a success moves LeaseState.Renewed and Deadline on, a
// failure with an unknown outcome sets LeaseState.Err until one succeeds.
//
// The goroutine runs while leases are kept and for keeperLinger after the
// last one goes, so that a lock taken and released over and over does not
// start a goroutine each time; Close stops it for good.
type Keeper struct {
	cfg KeeperConfig

	mu      sync.Mutex
	leases  map[*Lease]struct{}
	running bool
	closed  bool
	wake    time.Time // when the goroutine next looks, as it planned it
	kick    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Lease is one handle's entry in a Keeper.
type Lease struct {
	// Handle is the handle the lease belongs to.
	Handle *BaseHandle
	// Data is the backend's own state for the lease (key, owner value, ...).
	Data any

	next     time.Time // when to renew next
	renewed  time.Time // start of the last successful renewal or of the acquire
	deadline time.Time // end of the trust window (zero when TTL is 0)
	renewals uint64    // successful renewals so far
	lastErr  error     // of the last failed renewal; nil after a success
}

// state is what the lease's handle reports; k.mu is held once l is kept.
func (l *Lease) state() core.LeaseState {
	return core.LeaseState{Renewed: l.renewed, Deadline: l.deadline, Renewals: l.renewals, Err: l.lastErr}
}

// NewKeeper validates cfg and returns a Keeper.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	switch {
	case cfg.Renew == nil:
		return nil, Invalid("keeper: Renew is nil")
	case cfg.TTL < 0:
		return nil, Invalid("keeper: negative TTL %v", cfg.TTL)
	case cfg.TTL == 0 && cfg.Interval <= 0:
		return nil, Invalid("keeper: an Interval is needed when TTL is 0")
	}
	if cfg.Interval == 0 {
		cfg.Interval = cfg.TTL / 3
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	switch {
	case cfg.Interval < 0 || (cfg.TTL > 0 && cfg.Interval >= cfg.TTL-cfg.Margin):
		return nil, Invalid("keeper: interval %v must be positive and shorter than TTL − margin (%v)", cfg.Interval, cfg.TTL-cfg.Margin)
	case cfg.Margin < 0 || (cfg.TTL > 0 && cfg.Margin >= cfg.TTL):
		return nil, Invalid("keeper: margin %v must be in [0, TTL)", cfg.Margin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Keeper{
		cfg:    cfg,
		leases: make(map[*Lease]struct{}),
		kick:   make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

// TTL returns the configured lease TTL.
func (k *Keeper) TTL() time.Duration { return k.cfg.TTL }

// Keep starts renewing h's lease. start is when the acquire that granted it
// began: the first trust window ends at start + TTL − Margin. Releasing h
// stops the renewal. After Close, Keep marks h lost at once.
//
// Keep is cheap: a map insert. The first renewal falls on a grid of
// half-interval slots (early, never late), so leases granted close together
// are renewed in one batch, and the renewal goroutine is only woken when the
// new lease is due before the moment it already planned to look.
func (k *Keeper) Keep(h *BaseHandle, start time.Time, data any) *Lease {
	slot := max(k.cfg.Interval/2, time.Millisecond)
	l := &Lease{Handle: h, Data: data, next: start.Add(k.cfg.Interval).Truncate(slot), renewed: start}
	if k.cfg.TTL > 0 {
		l.deadline = start.Add(k.cfg.TTL - k.cfg.Margin)
	}
	h.setLease(l.state(), k.cfg.Clock)
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		h.Lose(errors.New("keeper closed"))
		return l
	}
	k.leases[l] = struct{}{}
	kick := false
	switch {
	case !k.running:
		k.running = true
		k.wake = l.next
		k.wg.Add(1)
		go k.run()
	case l.next.Before(k.wake):
		k.wake = l.next
		kick = true
	}
	k.mu.Unlock()
	if !h.setStopLease(func() { k.drop(l) }) {
		k.drop(l) // released already
	}
	if kick {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
	return l
}

// Len returns the number of leases being kept.
func (k *Keeper) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.leases)
}

// Close stops renewing, marks every kept handle lost and waits for the
// renewal goroutine to exit.
func (k *Keeper) Close() {
	k.mu.Lock()
	k.closed = true
	lost := k.takeAll()
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	for _, l := range lost {
		l.Handle.Lose(errors.New("keeper closed"))
	}
}

func (k *Keeper) takeAll() []*Lease {
	all := make([]*Lease, 0, len(k.leases))
	for l := range k.leases {
		all = append(all, l)
	}
	clear(k.leases)
	return all
}

func (k *Keeper) drop(l *Lease) {
	k.mu.Lock()
	delete(k.leases, l)
	k.mu.Unlock()
}

func (k *Keeper) has(l *Lease) bool {
	_, ok := k.leases[l]
	return ok
}

// keeperLinger is how long the renewal goroutine stays after the last
// lease is released.
const keeperLinger = 5 * time.Second

// run is the renewal goroutine: each round it renews the leases that are
// due, loses those whose trust window has closed, and sleeps until the next
// one falls due. It exits once no lease has been kept for keeperLinger, or
// on Close.
func (k *Keeper) run() {
	defer k.wg.Done()
	var idle time.Time // when the last lease went, while none is kept
	for {
		k.mu.Lock()
		now := k.cfg.Clock.Now()
		if len(k.leases) == 0 && !k.closed {
			if idle.IsZero() {
				idle = now
			}
			if until := idle.Add(keeperLinger); now.Before(until) {
				// Keep kicks us if a new lease falls due before then.
				k.wake = until
				k.mu.Unlock()
				k.sleep(until)
				continue
			}
		}
		if len(k.leases) == 0 || k.closed {
			k.running = false
			k.mu.Unlock()
			return
		}
		idle = time.Time{}
		r := k.sweepLocked(now)
		if len(r.batch) == 0 && len(r.expired) == 0 {
			k.wake = r.wake
		}
		k.mu.Unlock()

		for _, l := range r.expired {
			l.Handle.Lose(trustClosed(l.lastErr))
		}
		switch {
		case len(r.batch) > 0:
			k.renew(now, r.batch, r.deadline)
		case len(r.expired) == 0:
			k.sleep(r.wake)
		}
	}
}

// round is what one look at the kept leases found.
type round struct {
	batch    []*Lease  // due for renewal
	deadline time.Time // latest end of a trust window in batch; zero if none
	expired  []*Lease  // trust window closed; no longer kept
	wake     time.Time // when the next lease falls due, when nothing is to do now
}

// sweepLocked sorts the kept leases at now, removing the expired ones from
// the Keeper; k.mu is held.
func (k *Keeper) sweepLocked(now time.Time) round {
	var r round
	// Renew everything due within half an interval: renewing early is
	// harmless, and it gathers leases acquired at different moments into
	// the same round trip.
	horizon := now.Add(k.cfg.Interval / 2)
	for l := range k.leases {
		if !l.deadline.IsZero() && !now.Before(l.deadline) {
			r.expired = append(r.expired, l)
			delete(k.leases, l)
			continue
		}
		// A lease retrying after a failure waits for its own time: the
		// horizon would otherwise make it due again at once.
		if !l.next.After(horizon) && (l.lastErr == nil || !l.next.After(now)) {
			r.batch = append(r.batch, l)
			if l.deadline.After(r.deadline) {
				r.deadline = l.deadline
			}
			continue
		}
		if r.wake.IsZero() || l.next.Before(r.wake) {
			r.wake = l.next
		}
		if !l.deadline.IsZero() && l.deadline.Before(r.wake) {
			r.wake = l.deadline
		}
	}
	return r
}

// sleep waits until the clock reaches until, Keep kicks or Close is called.
func (k *Keeper) sleep(until time.Time) {
	select {
	case <-at(k.cfg.Clock, until):
	case <-k.kick:
	case <-k.ctx.Done():
	}
}

func trustClosed(last error) error {
	if last == nil {
		return errors.New("trust window closed before the lease was renewed")
	}
	return fmt.Errorf("trust window closed before the lease was renewed: %w", last)
}

// renew renews batch, whose renewal started at start, and records the
// outcomes; latest is the latest end of a trust window in batch.
func (k *Keeper) renew(start time.Time, batch []*Lease, latest time.Time) {
	k.settle(start, batch, k.call(start, batch, latest))
}

// errNoAnswer is why a lease whose renewal was still running is lost.
var errNoAnswer = fmt.Errorf("renewal did not answer in time: %w", context.DeadlineExceeded)

// call runs Renew on batch and returns its answers. It waits until the
// latest trust window of the batch closes (or an interval, when leases do
// not expire), and meanwhile loses each kept lease at the end of its own
// window (loseExpired): one lease near its end neither cuts the renewal of
// the others short nor stays trusted past its window while the call runs.
// A call that has not answered by then is not waited for: each lease gets
// an error saying so.
func (k *Keeper) call(start time.Time, batch []*Lease, latest time.Time) []error {
	if latest.IsZero() {
		latest = k.cfg.Clock.Now().Add(k.cfg.Interval)
	}
	ctx, cancel := context.WithTimeout(k.ctx, latest.Sub(k.cfg.Clock.Now()))
	defer cancel()
	late := at(k.cfg.Clock, latest) // the same bound on the Keeper's clock
	// Renew runs on its own goroutine so that a backend call that ignores
	// its context (a driver without context deadlines, a frozen server)
	// cannot keep a lease trusted past its window.
	done := make(chan []error, 1)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		done <- k.cfg.Renew(ctx, batch)
	}()
	for waiting := true; waiting; {
		var expiry <-chan time.Time
		if next := k.nextExpiry(); !next.IsZero() && next.Before(latest) {
			expiry = at(k.cfg.Clock, next)
		}
		select {
		case errs := <-done:
			return errs
		case <-expiry:
			k.loseExpired(start, batch)
		case <-ctx.Done():
			waiting = false
		case <-late:
			waiting = false
		}
	}
	select {
	case errs := <-done: // answered at the deadline: use the answer
		return errs
	default:
	}
	why := errNoAnswer
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
		why = fmt.Errorf("renewal did not answer in time: %w", cause)
	}
	errs := make([]error, len(batch))
	for i := range errs {
		errs[i] = why
	}
	return errs
}

// nextExpiry returns the earliest end of a trust window among the kept
// leases, or zero when none can close.
func (k *Keeper) nextExpiry() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var next time.Time
	for l := range k.leases {
		if !l.deadline.IsZero() && (next.IsZero() || l.deadline.Before(next)) {
			next = l.deadline
		}
	}
	return next
}

// loseExpired loses the kept leases whose trust window has closed while
// the renewal of batch, started at start, runs: those of batch because
// their renewal has not answered, the others for their last error.
func (k *Keeper) loseExpired(start time.Time, batch []*Lease) {
	now := k.cfg.Clock.Now()
	k.mu.Lock()
	var lost []*Lease
	for l := range k.leases {
		if !l.deadline.IsZero() && !now.Before(l.deadline) {
			delete(k.leases, l)
			lost = append(lost, l)
		}
	}
	k.mu.Unlock()
	for _, l := range lost {
		if !slices.Contains(batch, l) {
			l.Handle.Lose(trustClosed(l.lastErr))
			continue
		}
		why := errNoAnswer
		if l.lastErr != nil {
			why = errors.Join(l.lastErr, why) // keep why the earlier renewals failed
		}
		l.Handle.reportRenewal(now.Sub(start), why)
		l.Handle.Lose(trustClosed(why))
	}
}

// settle records the outcome of the renewal of batch that started at
// start: errs[i] is lease i's. The handles learn the outcomes once k.mu is
// released: a handle's mutex is never taken under the Keeper's.
func (k *Keeper) settle(start time.Time, batch []*Lease, errs []error) {
	now := k.cfg.Clock.Now()
	type report struct {
		h *BaseHandle
		s core.LeaseState
	}
	reports := make([]report, 0, len(batch))
	var lost []*Lease
	k.mu.Lock()
	for i, l := range batch {
		if !k.has(l) {
			continue // released while renewing
		}
		err := errors.New("keeper: Renew returned too few results")
		if i < len(errs) {
			err = errs[i]
		}
		if k.settleLocked(l, err, start, now) {
			reports = append(reports, report{l.Handle, l.state()})
		} else {
			lost = append(lost, l)
		}
	}
	k.mu.Unlock()
	took := now.Sub(start)
	for _, r := range reports {
		r.h.setLease(r.s, k.cfg.Clock)
		r.h.reportRenewal(took, r.s.Err)
	}
	for _, l := range lost {
		l.Handle.reportRenewal(took, l.lastErr)
		l.Handle.Lose(l.lastErr)
	}
}

// settleLocked records err, the outcome at now of l's renewal that started
// at start, and reports whether l is still kept; a lease no longer kept is
// lost, for the reason in l.lastErr. k.mu is held.
func (k *Keeper) settleLocked(l *Lease, err error, start, now time.Time) bool {
	switch {
	case err == nil && !l.deadline.IsZero() && !now.Before(l.deadline):
		// Renewed, but the answer came after the window closed: the
		// handle has read the lease lost by the clock already.
		l.lastErr = trustClosed(errors.New("renewal answered after the window closed"))
	case err == nil:
		l.lastErr = nil
		l.next = start.Add(k.cfg.Interval)
		l.renewed = start
		l.renewals++
		if k.cfg.TTL > 0 {
			l.deadline = start.Add(k.cfg.TTL - k.cfg.Margin)
		}
		return true
	case errors.Is(err, core.ErrLockLost):
		l.lastErr = err
	case !l.deadline.IsZero() && !now.Before(l.deadline):
		if l.lastErr != nil {
			err = errors.Join(l.lastErr, err) // keep why the earlier renewals failed
		}
		l.lastErr = trustClosed(err)
	default:
		l.lastErr = err
		l.next = now.Add(max(k.cfg.Interval/4, 10*time.Millisecond))
		return true
	}
	delete(k.leases, l)
	return false
}
