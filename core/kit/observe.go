package kit

import (
	"context"
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
)

// Observing. A backend reports what happens to its locks (core.Observer)
// by passing the Lockers it makes through its Provider's Probe, and
// nothing else: the Probe's Lockers report each acquire, and the handle
// they return, when built on BaseHandle, reports its release and its loss;
// the Keeper reports each renewal of the handles it keeps; Handoffs marks
// the grants it hands on. So every backend reports the same events, from
// the same places.
//
// A Provider without an observer or a logger has a nil Probe, which
// returns the backend's Lockers themselves: no wrapper, no event built.
// What remains is one atomic load per release, per loss and per renewal,
// of a pointer that stays nil.

// Probe reports the events of one Provider's locks to its observers. Make
// one with NewProbe when the Provider is made, and pass every Locker the
// Provider hands out through Mutex, RWMutex or Semaphore. A nil *Probe
// returns Lockers unchanged.
type Probe struct {
	backend string
	obs     core.Observer
}

// NewProbe returns the Probe of a Provider of backend (the name its
// errors carry, core.Error.Backend) that reports to its logger log (the
// lines OBSERVABILITY.md lists; nil or a logger that discards logs
// nothing) and to each non-nil observer of obs, in order. With neither it
// returns nil.
func NewProbe(backend string, log *slog.Logger, obs ...core.Observer) *Probe {
	var all fanOut
	for _, o := range append([]core.Observer{newLogEvents(log)}, obs...) {
		if o != nil {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return &Probe{backend: backend, obs: all[0]}
	}
	return &Probe{backend: backend, obs: all}
}

// fanOut is an Observer that hands each event to several, in order.
type fanOut []core.Observer

func (f fanOut) Observe(ctx context.Context, e core.Event) {
	for _, o := range f {
		o.Observe(ctx, e)
	}
}

// Mutex returns l, a mutex, reporting to p's observers. A Locker that
// implements core.Inspector still does.
func (p *Probe) Mutex(l core.Locker) core.Locker {
	if p == nil {
		return l
	}
	return p.locker("mutex", l)
}

// Semaphore returns l, a semaphore, reporting to p's observers.
func (p *Probe) Semaphore(l core.Locker) core.Locker {
	if p == nil {
		return l
	}
	return p.locker("semaphore", l)
}

// RWMutex returns l, a reader-writer lock, reporting to p's observers: its
// write side as primitive "rwmutex", its read side (RLocker, asked once
// here) as "rwmutex.read". When l implements core.Inspector, so does the
// result; what the read side implements is kept too.
func (p *Probe) RWMutex(l core.RWLocker) core.RWLocker {
	if p == nil {
		return l
	}
	rw := &probedRW{probed: &probed{l: l, p: p, primitive: "rwmutex"}, read: p.locker("rwmutex.read", l.RLocker())}
	if in, ok := l.(core.Inspector); ok {
		return struct {
			*probedRW
			core.Inspector
		}{rw, in}
	}
	return rw
}

// locker wraps l, keeping core.Inspector when l implements it.
func (p *Probe) locker(primitive string, l core.Locker) core.Locker {
	pl := &probed{l: l, p: p, primitive: primitive}
	if in, ok := l.(core.Inspector); ok {
		return struct {
			*probed
			core.Inspector
		}{pl, in}
	}
	return pl
}

// probed is a Locker that reports its acquires.
type probed struct {
	l         core.Locker
	p         *Probe
	primitive string
}

type probedRW struct {
	*probed
	read core.Locker
}

func (l *probedRW) RLocker() core.Locker { return l.read }

func (l *probed) Name() string { return l.l.Name() }

func (l *probed) TryAcquire(ctx context.Context) (core.Handle, error) {
	start := time.Now()
	h, err := l.l.TryAcquire(ctx)
	l.acquired(ctx, h, err, start, true)
	return h, err
}

func (l *probed) Acquire(ctx context.Context) (core.Handle, error) {
	l.p.obs.Observe(ctx, l.event(core.EventWait))
	start := time.Now()
	h, err := l.l.Acquire(ctx)
	l.acquired(ctx, h, err, start, false)
	return h, err
}

func (l *probed) event(kind core.EventKind) core.Event {
	return core.Event{Kind: kind, Backend: l.p.backend, Primitive: l.primitive, Name: l.l.Name()}
}

// acquired reports an acquire that started at start and returned h or
// err, and attaches a probe to h so that its release and loss are
// reported too. The acquire is reported first: a loss is never reported
// before the grant it ends.
func (l *probed) acquired(ctx context.Context, h core.Handle, err error, start time.Time, try bool) {
	ev := l.event(core.EventAcquire)
	ev.Try, ev.Err = try, err
	now := time.Now()
	ev.Duration = now.Sub(start)
	if h == nil {
		l.p.obs.Observe(ctx, ev)
		return
	}
	ev.Token = h.FencingToken()
	b, ok := h.(interface{ kitBase() *BaseHandle })
	if !ok {
		l.p.obs.Observe(ctx, ev) // not built on BaseHandle: its end goes unreported
		return
	}
	base := b.kitBase()
	ev.Handoff = base.handedBy()
	l.p.obs.Observe(ctx, ev)
	base.attach(&handleProbe{obs: l.p.obs, ev: l.event(0), since: now}).report(ev.Token)
}

// handleProbe reports the events of one granted handle.
type handleProbe struct {
	obs   core.Observer
	ev    core.Event // Backend, Primitive and Name
	since time.Time  // when the grant reached its acquirer
}

// released reports the release of the grant with token, a call with ctx
// that started at start and ended with err.
func (p *handleProbe) released(ctx context.Context, token uint64, start time.Time, err error) {
	ev := p.ev
	now := time.Now()
	ev.Kind, ev.Token, ev.Err = core.EventRelease, token, err
	ev.Duration, ev.Held = now.Sub(start), start.Sub(p.since)
	p.obs.Observe(ctx, ev)
}

// renewed reports a renewal of the grant with token that took d.
func (p *handleProbe) renewed(token uint64, d time.Duration, err error) {
	ev := p.ev
	ev.Kind, ev.Token, ev.Err, ev.Duration = core.EventRenew, token, err, d
	p.obs.Observe(context.Background(), ev)
}

// loss is a loss to report, once the handle's mutex is released, to the
// probe attached when the handle was lost; the zero loss reports nothing.
type loss struct {
	p     *handleProbe
	cause error
}

func (l loss) report(token uint64) {
	if l.p == nil {
		return
	}
	ev := l.p.ev
	ev.Kind, ev.Token, ev.Err, ev.Held = core.EventLost, token, l.cause, time.Since(l.p.since)
	l.p.obs.Observe(context.Background(), ev)
}

// kitBase lets a Probe find the BaseHandle in a backend's handle that
// embeds it.
func (h *BaseHandle) kitBase() *BaseHandle { return h }

// attach makes h report its end to p from now on. A handle lost before
// returns that loss to report, as the loss itself did not.
func (h *BaseHandle) attach(p *handleProbe) loss {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probe.Store(p)
	if h.released || h.base.Err() == nil {
		return loss{}
	}
	return loss{p, context.Cause(h.base)}
}

// HandedByServer records that a release on the server named this grant's
// acquire the next holder, so that the acquire took the lock without an
// attempt of its own: observers see "server" in its Event.Handoff. Call it
// before returning the handle.
func (h *BaseHandle) HandedByServer() { h.setHandedBy("server") }

func (h *BaseHandle) setHandedBy(where string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handoff = where
}

func (h *BaseHandle) handedBy() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handoff
}

// markHandedOn records that a local handoff made h, if it is built on
// BaseHandle.
func markHandedOn(h core.Handle) {
	if b, ok := h.(interface{ kitBase() *BaseHandle }); ok {
		b.kitBase().setHandedBy("local")
	}
}

// reportRenewal reports the renewal of h that took d and ended with err,
// when a probe is attached.
func (h *BaseHandle) reportRenewal(d time.Duration, err error) {
	if p := h.probe.Load(); p != nil {
		p.renewed(h.token, d, err)
	}
}
