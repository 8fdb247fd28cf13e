package otel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/distlock/distlock/polllease"
)

// PollLease records the metrics of polllease Coordinators through
// OpenTelemetry, fed by their events (Config.OnEvent: OnEvent):
//
//	distlock.polllease.owned      up-down counter: targets whose lease this instance holds
//	distlock.polllease.uncertain  up-down counter: of those, the ones paused as uncertain
//	distlock.polllease.releases   counter: leases given up, by distlock.reason (rebalance: a move; stop; target removed; manual)
//	distlock.polllease.lost       counter: leases the backend ended
//
// The same metrics as observe/prometheus's PollLease. The gauges are
// up-down counters, so the Coordinators of one process that share a
// PollLease add up, as the lock metrics of several Providers do; each
// Coordinator's targets are told apart by its instance ID. Of the options,
// WithMeterProvider applies.
type PollLease struct {
	owned     metric.Int64UpDownCounter
	uncertain metric.Int64UpDownCounter
	releases  metric.Int64Counter
	lost      metric.Int64Counter

	mu      sync.Mutex
	holding map[lease]bool // leases held; true while uncertain
}

// A lease is one Coordinator's lease of one target.
type lease struct{ instance, target string }

// NewPollLease returns a PollLease at zero. It fails when an instrument
// cannot be made.
func NewPollLease(opts ...Option) (*PollLease, error) {
	m := newOptions(opts).meters.Meter(instrumentation)
	p := &PollLease{holding: make(map[lease]bool)}
	var errs [4]error
	p.owned, errs[0] = m.Int64UpDownCounter("distlock.polllease.owned", metric.WithUnit("{target}"),
		metric.WithDescription("Targets whose lease this instance holds."))
	p.uncertain, errs[1] = m.Int64UpDownCounter("distlock.polllease.uncertain", metric.WithUnit("{target}"),
		metric.WithDescription("Targets whose poller is paused because the lease may no longer count as this instance's."))
	p.releases, errs[2] = m.Int64Counter("distlock.polllease.releases", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases this instance gave up, by reason; distlock.reason=rebalance counts moves to another instance."))
	p.lost, errs[3] = m.Int64Counter("distlock.polllease.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases the backend ended (not renewed in time, or taken)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return p, nil
}

// OnEvent takes a Coordinator's events: pass it as Config.OnEvent, or
// call it from yours. Events of a target this instance does not hold
// (an uncertain or released one it never acquired) change nothing.
func (p *PollLease) OnEvent(e polllease.Event) {
	ctx := context.Background()
	k := lease{e.Instance, e.Target}
	p.mu.Lock()
	defer p.mu.Unlock()
	uncertain, held := p.holding[k]
	switch e.Kind {
	case polllease.EventAcquired:
		if !held {
			p.holding[k] = false
			p.owned.Add(ctx, 1)
		}
	case polllease.EventUncertain:
		if held && !uncertain {
			p.holding[k] = true
			p.uncertain.Add(ctx, 1)
		}
	case polllease.EventResumed:
		if uncertain {
			p.holding[k] = false
			p.uncertain.Add(ctx, -1)
		}
	case polllease.EventReleased, polllease.EventLost:
		if !held {
			return
		}
		delete(p.holding, k)
		p.owned.Add(ctx, -1)
		if uncertain {
			p.uncertain.Add(ctx, -1)
		}
		if e.Kind == polllease.EventLost {
			p.lost.Add(ctx, 1)
		} else {
			p.releases.Add(ctx, 1, metric.WithAttributes(attribute.String("distlock.reason", string(e.Reason))))
		}
	}
}
