package otel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures an Observer or Elections.
type Option func(*options)

type options struct {
	tracers trace.TracerProvider
	meters  metric.MeterProvider
	names   bool
}

// newOptions applies opts over the defaults: the global providers, no
// lock names in metrics.
func newOptions(opts []Option) options {
	o := options{tracers: otel.GetTracerProvider(), meters: otel.GetMeterProvider()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithTracerProvider sets where spans go. Default: the global provider
// (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp != nil {
			o.tracers = tp
		}
	}
}

// WithMeterProvider sets where metrics go. Default: the global provider
// (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp != nil {
			o.meters = mp
		}
	}
}

// WithLockNames adds the attribute distlock.lock, the lock's name, to the
// metrics (spans always carry it). Off by default: every name makes
// series of its own in the backend the metrics go to. Turn it on only for
// a small, fixed set of names.
func WithLockNames() Option { return func(o *options) { o.names = true } }
