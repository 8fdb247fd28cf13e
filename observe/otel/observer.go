package otel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/distlock/distlock/core"
)

// instrumentation is the name tracers and meters are asked for.
const instrumentation = "github.com/distlock/distlock/observe/otel"

// Observer is a core.Observer that traces acquires and releases and
// records the lock metrics through OpenTelemetry. Give it to every
// Provider with the backend's WithObserver option; one Observer serves
// any number of Providers and backends.
type Observer struct {
	tracer trace.Tracer
	names  bool

	acquire  metric.Float64Histogram
	hold     metric.Float64Histogram
	held     metric.Int64UpDownCounter
	waiting  metric.Int64UpDownCounter
	lost     metric.Int64Counter
	renewals metric.Int64Counter
	renewal  metric.Float64Histogram
	handoffs metric.Int64Counter
}

var _ core.Observer = (*Observer)(nil)

// New returns an Observer on the providers its options name, the global
// ones by default. It fails when an instrument cannot be made.
func New(opts ...Option) (*Observer, error) {
	o := newOptions(opts)
	m := o.meters.Meter(instrumentation)
	obs := &Observer{tracer: o.tracers.Tracer(instrumentation), names: o.names}
	var errs [8]error
	obs.acquire, errs[0] = m.Float64Histogram("distlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time an Acquire or TryAcquire call took, by outcome: acquired, busy, cancelled, error."),
		metric.WithExplicitBucketBoundaries(acquireBuckets...))
	obs.hold, errs[1] = m.Float64Histogram("distlock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a grant was held, by how it ended: released, error (the release failed), lost."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	obs.held, errs[2] = m.Int64UpDownCounter("distlock.held", metric.WithUnit("{grant}"),
		metric.WithDescription("Grants held now."))
	obs.waiting, errs[3] = m.Int64UpDownCounter("distlock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Acquire calls waiting now."))
	obs.lost, errs[4] = m.Int64Counter("distlock.lost", metric.WithUnit("{grant}"),
		metric.WithDescription("Grants lost: the backend saw the lock slip away."))
	obs.renewals, errs[5] = m.Int64Counter("distlock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals (periodic checks where leases do not expire), by result: renewed, error, lost."))
	obs.renewal, errs[6] = m.Float64Histogram("distlock.renewal.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trip of a lease renewal, once per lease renewed."),
		metric.WithExplicitBucketBoundaries(renewalBuckets...))
	obs.handoffs, errs[7] = m.Int64Counter("distlock.handoffs", metric.WithUnit("{grant}"),
		metric.WithDescription("Grants a release handed straight to a waiting acquire, by where: local, server."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return obs, nil
}

// Buckets of the histograms, in seconds: the same as observe/prometheus.
var (
	acquireBuckets = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{.001, .004, .016, .064, .256, 1.024, 4.096, 16.384, 65.536, 262.144, 1048.576, 4194.304}
	renewalBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// Observe implements core.Observer: a span for each acquire (child of
// the caller's span in ctx) and release, a root span for each loss, and
// the metrics.
func (o *Observer) Observe(ctx context.Context, e core.Event) {
	lock := []attribute.KeyValue{
		attribute.String("distlock.backend", e.Backend),
		attribute.String("distlock.primitive", e.Primitive),
	}
	if o.names {
		lock = append(lock, attribute.String("distlock.lock", e.Name))
	}
	with := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributes(append(kv, lock...)...)
	}
	outcome := attribute.String("distlock.outcome", e.Outcome())
	switch e.Kind {
	case core.EventWait:
		o.waiting.Add(ctx, 1, with())
	case core.EventAcquire:
		o.span(ctx, "distlock.acquire", e)
		o.acquire.Record(ctx, e.Duration.Seconds(), with(outcome))
		if !e.Try {
			o.waiting.Add(ctx, -1, with())
		}
		if e.Err == nil {
			o.held.Add(ctx, 1, with())
		}
		if e.Handoff != "" {
			o.handoffs.Add(ctx, 1, with(attribute.String("distlock.via", e.Handoff)))
		}
	case core.EventRelease:
		o.span(ctx, "distlock.release", e)
		o.held.Add(ctx, -1, with())
		o.hold.Record(ctx, e.Held.Seconds(), with(outcome))
	case core.EventLost:
		o.span(ctx, "distlock.lost", e)
		o.held.Add(ctx, -1, with())
		o.lost.Add(ctx, 1, with())
		o.hold.Record(ctx, e.Held.Seconds(), with(outcome))
	case core.EventRenew:
		o.renewals.Add(ctx, 1, with(attribute.String("distlock.result", e.Outcome())))
		o.renewal.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(lock[0]))
	}
}

// span records the span of e, which ended now after e.Duration, under
// ctx's span.
func (o *Observer) span(ctx context.Context, name string, e core.Event) {
	end := time.Now()
	attrs := []attribute.KeyValue{
		attribute.String("distlock.backend", e.Backend),
		attribute.String("distlock.primitive", e.Primitive),
		attribute.String("distlock.lock", e.Name),
		attribute.String("distlock.outcome", e.Outcome()),
	}
	if e.Token != 0 {
		attrs = append(attrs, attribute.Int64("distlock.token", int64(e.Token)))
	}
	if e.Try {
		attrs = append(attrs, attribute.Bool("distlock.try", true))
	}
	if e.Handoff != "" {
		attrs = append(attrs, attribute.String("distlock.handoff", e.Handoff))
	}
	if e.Held != 0 {
		attrs = append(attrs, attribute.Float64("distlock.held_seconds", e.Held.Seconds()))
	}
	kind := trace.SpanKindClient // a call to the backend
	if e.Kind == core.EventLost {
		kind = trace.SpanKindInternal // seen by the backend's goroutine
	}
	_, span := o.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if e.Outcome() == "error" || e.Kind == core.EventLost {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}
