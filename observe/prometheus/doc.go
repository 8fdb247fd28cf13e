// Package prometheus exports distlock's metrics to Prometheus
// (github.com/prometheus/client_golang). It is a module of its own, so
// that no backend pulls the Prometheus client.
//
// [Locks] is a core.Observer: give it to every Provider (each backend's
// WithObserver) and register it. Its series, labelled backend ("file",
// "redis", "redlock", "postgres", "nats") and primitive ("mutex",
// "rwmutex", "rwmutex.read", "semaphore"):
//
//	distlock_acquire_duration_seconds{outcome}  histogram: Acquire and TryAcquire calls, outcome acquired, busy, cancelled or error
//	distlock_hold_duration_seconds{outcome}     histogram: grants ended, outcome released, error or lost
//	distlock_held                               gauge: grants held
//	distlock_waiting                            gauge: Acquire calls waiting
//	distlock_lost_total                         counter: grants lost
//	distlock_renewals_total{result}             counter: lease renewals, result renewed, error or lost
//	distlock_renewal_duration_seconds           histogram: a renewal's round trip (labelled backend only)
//	distlock_handoffs_total{via}                counter: grants handed straight to a waiter, via local or server
//
// Lock names are not labels: an application makes as many names as it
// likes, and each would make series of its own that never go away.
// [WithLockNames] adds them, for a small fixed set of names.
//
// [Elections] is an election.Metrics (Config.Metrics): leader gauge, term,
// transitions and failed campaigns per election. [PollLease] takes a
// polllease.Coordinator's events (Config.OnEvent): targets owned and
// uncertain, releases by reason (moves are reason="rebalance"), losses.
package prometheus
