package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distlock/distlock/election"
)

// Elections is an election.Metrics (Config.Metrics) that keeps the
// metrics of this process's candidates, and the prometheus.Collector that
// exports them, labelled by group (the election's group: the name of its
// lock):
//
//	distlock_election_leader{group}                   1 while this candidate leads, else 0
//	distlock_election_term{group}                     the term this candidate last won (its fencing token)
//	distlock_election_transitions_total{group,kind}   promotions and demotions
//	distlock_election_campaign_failures_total{group}  campaigns that ended with an error
//
// A candidate's series appear at its first promotion or failed campaign.
// One Elections serves every election of a process (a RoleManager's
// roles, say), with one candidate per election.
type Elections struct {
	leader      *prometheus.GaugeVec
	term        *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	failures    *prometheus.CounterVec
}

var _ election.Metrics = (*Elections)(nil)

// NewElections returns an Elections with no series yet.
func NewElections() *Elections {
	return &Elections{
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "distlock_election_leader",
			Help: "1 while this candidate leads the election, else 0.",
		}, []string{"group"}),
		term: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "distlock_election_term",
			Help: "The term this candidate last won: the lock's fencing token.",
		}, []string{"group"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_election_transitions_total",
			Help: "Leadership changes of this candidate, by kind: promoted, demoted.",
		}, []string{"group", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distlock_election_campaign_failures_total",
			Help: "Campaigns that ended with an error (the store unreachable, the health check failing).",
		}, []string{"group"}),
	}
}

// SetLeader implements election.Metrics.
func (m *Elections) SetLeader(name string, leader bool) {
	v := 0.0
	if leader {
		v = 1
	}
	m.leader.WithLabelValues(name).Set(v)
}

// Transition implements election.Metrics.
func (m *Elections) Transition(name string, kind election.EventKind, term uint64) {
	m.transitions.WithLabelValues(name, kind.String()).Inc()
	if kind == election.Promoted {
		m.term.WithLabelValues(name).Set(float64(term))
	}
}

// CampaignFailed implements election.Metrics.
func (m *Elections) CampaignFailed(name string, _ error) {
	m.failures.WithLabelValues(name).Inc()
}

func (m *Elections) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.leader, m.term, m.transitions, m.failures}
}

// Describe implements prometheus.Collector.
func (m *Elections) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Elections) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
