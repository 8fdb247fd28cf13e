package prometheus

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distlock/distlock/core"
)

// Locks is a core.Observer that keeps the metrics of the locks it is told
// about, and the prometheus.Collector that exports them. Give it to every
// Provider with the backend's WithObserver option and register it once:
//
//	m := prometheus.NewLocks()
//	registry.MustRegister(m)
//	p, err := redislock.New(rdb, redislock.WithObserver(m))
//
// One Locks serves any number of Providers and backends: the backend is a
// label.
type Locks struct {
	names    bool
	acquire  *prometheus.HistogramVec
	hold     *prometheus.HistogramVec
	held     *prometheus.GaugeVec
	waiting  *prometheus.GaugeVec
	lost     *prometheus.CounterVec
	renewals *prometheus.CounterVec
	renewal  *prometheus.HistogramVec
	handoffs *prometheus.CounterVec
}

var _ core.Observer = (*Locks)(nil)

// Option configures Locks.
type Option func(*options)

type options struct {
	names bool
}

// WithLockNames adds the label lock, the lock's name, to every series but
// the renewal latency's. Off by default: lock names are as many as an
// application makes, and each makes series of its own that live as long
// as the process. Turn it on only for a small, fixed set of names.
func WithLockNames() Option { return func(o *options) { o.names = true } }

// Buckets of the histograms, in seconds.
var (
	// acquireBuckets spans an uncontended acquire (a fraction of a
	// millisecond) to a long wait.
	acquireBuckets = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// holdBuckets spans a short critical section to a leader's term.
	holdBuckets = prometheus.ExponentialBuckets(.001, 4, 12) // 1 ms to about 70 min
	// renewalBuckets spans one round trip to a renewal that times out.
	renewalBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// NewLocks returns a Locks with no series yet.
func NewLocks(opts ...Option) *Locks {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	labels := func(ls ...string) []string {
		if o.names {
			ls = append(ls, "lock")
		}
		return ls
	}
	return &Locks{
		names: o.names,
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "distlock_acquire_duration_seconds",
			Help:    "Time an Acquire or TryAcquire call took, by outcome: acquired, busy, cancelled, error.",
			Buckets: acquireBuckets,
		}, labels("backend", "primitive", "outcome")),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "distlock_hold_duration_seconds",
			Help:    "Time a grant was held, by how it ended: released, error (the release failed), lost.",
			Buckets: holdBuckets,
		}, labels("backend", "primitive", "outcome")),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "distlock_held",
			Help: "Grants held now.",
		}, labels("backend", "primitive")),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "distlock_waiting",
			Help: "Acquire calls waiting now.",
		}, labels("backend", "primitive")),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_lost_total",
			Help: "Grants lost: the backend saw the lock slip away (not renewed in time, key deleted, connection dropped).",
		}, labels("backend", "primitive")),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_renewals_total",
			Help: "Lease renewals (periodic checks where leases do not expire), by result: renewed, error (outcome unknown, retried), lost.",
		}, labels("backend", "primitive", "result")),
		renewal: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "distlock_renewal_duration_seconds",
			Help:    "Round trip of a lease renewal, once per lease renewed (leases renewed together share one).",
			Buckets: renewalBuckets,
		}, []string{"backend"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_handoffs_total",
			Help: "Grants a release handed straight to a waiting acquire, by where: local (same Provider), server.",
		}, labels("backend", "primitive", "via")),
	}
}

// Observe implements core.Observer.
func (m *Locks) Observe(_ context.Context, e core.Event) {
	values := func(vs ...string) []string {
		if m.names {
			vs = append(vs, e.Name)
		}
		return vs
	}
	b, p := e.Backend, e.Primitive
	switch e.Kind {
	case core.EventWait:
		m.waiting.WithLabelValues(values(b, p)...).Inc()
	case core.EventAcquire:
		m.acquire.WithLabelValues(values(b, p, e.Outcome())...).Observe(e.Duration.Seconds())
		if !e.Try {
			m.waiting.WithLabelValues(values(b, p)...).Dec()
		}
		if e.Err == nil {
			m.held.WithLabelValues(values(b, p)...).Inc()
		}
		if e.Handoff != "" {
			m.handoffs.WithLabelValues(values(b, p, e.Handoff)...).Inc()
		}
	case core.EventRelease:
		m.held.WithLabelValues(values(b, p)...).Dec()
		m.hold.WithLabelValues(values(b, p, e.Outcome())...).Observe(e.Held.Seconds())
	case core.EventLost:
		m.held.WithLabelValues(values(b, p)...).Dec()
		m.lost.WithLabelValues(values(b, p)...).Inc()
		m.hold.WithLabelValues(values(b, p, e.Outcome())...).Observe(e.Held.Seconds())
	case core.EventRenew:
		m.renewals.WithLabelValues(values(b, p, e.Outcome())...).Inc()
		m.renewal.WithLabelValues(b).Observe(e.Duration.Seconds())
	}
}

func (m *Locks) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acquire, m.hold, m.held, m.waiting, m.lost, m.renewals, m.renewal, m.handoffs}
}

// Describe implements prometheus.Collector.
func (m *Locks) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Locks) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
