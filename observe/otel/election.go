package otel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/distlock/distlock/election"
)

// Elections is an election.Metrics (Config.Metrics) that records this
// process's candidates through OpenTelemetry, with the attribute
// distlock.group (the election's group: the name of its lock):
//
//	distlock.election.leader             gauge: 1 while this candidate leads, else 0
//	distlock.election.term               gauge: the term this candidate last won
//	distlock.election.transitions        counter: promotions and demotions (distlock.transition)
//	distlock.election.campaign_failures  counter: campaigns that ended with an error
//
// Of the options, WithMeterProvider applies.
type Elections struct {
	leader      metric.Int64Gauge
	term        metric.Int64Gauge
	transitions metric.Int64Counter
	failures    metric.Int64Counter
}

var _ election.Metrics = (*Elections)(nil)

// NewElections returns an Elections. It fails when an instrument cannot
// be made.
func NewElections(opts ...Option) (*Elections, error) {
	m := newOptions(opts).meters.Meter(instrumentation)
	var e Elections
	var errs [4]error
	e.leader, errs[0] = m.Int64Gauge("distlock.election.leader",
		metric.WithDescription("1 while this candidate leads the election, else 0."))
	e.term, errs[1] = m.Int64Gauge("distlock.election.term",
		metric.WithDescription("The term this candidate last won: the lock's fencing token."))
	e.transitions, errs[2] = m.Int64Counter("distlock.election.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Leadership changes of this candidate, by kind: promoted, demoted."))
	e.failures, errs[3] = m.Int64Counter("distlock.election.campaign_failures", metric.WithUnit("{campaign}"),
		metric.WithDescription("Campaigns that ended with an error."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &e, nil
}

func groupAttr(name string) attribute.KeyValue { return attribute.String("distlock.group", name) }

// SetLeader implements election.Metrics.
func (e *Elections) SetLeader(name string, leader bool) {
	var v int64
	if leader {
		v = 1
	}
	e.leader.Record(context.Background(), v, metric.WithAttributes(groupAttr(name)))
}

// Transition implements election.Metrics.
func (e *Elections) Transition(name string, kind election.EventKind, term uint64) {
	ctx := context.Background()
	e.transitions.Add(ctx, 1, metric.WithAttributes(groupAttr(name), attribute.String("distlock.transition", kind.String())))
	if kind == election.Promoted {
		e.term.Record(ctx, int64(term), metric.WithAttributes(groupAttr(name)))
	}
}

// CampaignFailed implements election.Metrics.
func (e *Elections) CampaignFailed(name string, _ error) {
	e.failures.Add(context.Background(), 1, metric.WithAttributes(groupAttr(name)))
}
