package prometheus

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distlock/distlock/polllease"
)

// PollLease keeps the metrics of one polllease.Coordinator, fed by its
// events (Config.OnEvent: OnEvent), and is the prometheus.Collector that
// exports them:
//
//	distlock_polllease_owned                   targets whose lease this instance holds
//	distlock_polllease_uncertain               of those, the ones paused as uncertain
//	distlock_polllease_releases_total{reason}  leases given up: rebalance (a move), stop, target removed, manual
//	distlock_polllease_lost_total              leases the backend ended
//
// Register one per Coordinator; several in one process need a label of
// their own each (prometheus.WrapRegistererWith).
type PollLease struct {
	owned     prometheus.Gauge
	uncertain prometheus.Gauge
	releases  *prometheus.CounterVec
	lost      prometheus.Counter

	mu      sync.Mutex
	paused  map[string]bool // targets held and uncertain
	holding map[string]bool // targets held
}

// NewPollLease returns a PollLease at zero.
func NewPollLease() *PollLease {
	return &PollLease{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "distlock_polllease_owned",
			Help: "Targets whose lease this instance holds.",
		}),
		uncertain: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "distlock_polllease_uncertain",
			Help: "Targets whose poller is paused because the lease may no longer count as this instance's.",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_polllease_releases_total",
			Help: "Leases this instance gave up, by reason; reason=\"rebalance\" counts moves to another instance.",
		}, []string{"reason"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "distlock_polllease_lost_total",
			Help: "Leases the backend ended (not renewed in time, or taken).",
		}),
		paused:  make(map[string]bool),
		holding: make(map[string]bool),
	}
}

// OnEvent takes the Coordinator's events: pass it as Config.OnEvent, or
// call it from yours.
func (m *PollLease) OnEvent(e polllease.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Kind {
	case polllease.EventAcquired:
		m.holding[e.Target] = true
	case polllease.EventUncertain:
		if m.holding[e.Target] {
			m.paused[e.Target] = true
		}
	case polllease.EventResumed:
		delete(m.paused, e.Target)
	case polllease.EventReleased, polllease.EventLost:
		if !m.holding[e.Target] {
			return
		}
		delete(m.holding, e.Target)
		delete(m.paused, e.Target)
		if e.Kind == polllease.EventLost {
			m.lost.Inc()
		} else {
			m.releases.WithLabelValues(string(e.Reason)).Inc()
		}
	}
	m.owned.Set(float64(len(m.holding)))
	m.uncertain.Set(float64(len(m.paused)))
}

func (m *PollLease) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.owned, m.uncertain, m.releases, m.lost}
}

// Describe implements prometheus.Collector.
func (m *PollLease) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *PollLease) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
