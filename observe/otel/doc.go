// Package otel traces distlock's acquires and releases and records its
// metrics through OpenTelemetry (go.opentelemetry.io/otel). It is a module
// of its own, so that no backend pulls OpenTelemetry.
//
// [Observer] is a core.Observer: give it to every Provider (each backend's
// WithObserver). Each Acquire and TryAcquire call becomes a span
// "distlock.acquire", each Release a span "distlock.release", children of
// the span in the call's context; a lost grant becomes a root span
// "distlock.lost" with the cause as its error. Span attributes:
// distlock.backend, distlock.primitive, distlock.lock (the name),
// distlock.outcome, distlock.token (when granted), distlock.try,
// distlock.handoff, distlock.held_seconds (release, loss).
//
// Its metrics are those of observe/prometheus under OpenTelemetry's
// naming (dots, units apart), with the attributes distlock.backend and
// distlock.primitive:
//
//	distlock.acquire.duration   histogram, s: by distlock.outcome (acquired, busy, cancelled, error)
//	distlock.hold.duration      histogram, s: by distlock.outcome (released, error, lost)
//	distlock.held               up-down counter: grants held
//	distlock.waiting            up-down counter: Acquire calls waiting
//	distlock.lost               counter: grants lost
//	distlock.renewals           counter: by distlock.result (renewed, error, lost)
//	distlock.renewal.duration   histogram, s: a renewal's round trip (distlock.backend only)
//	distlock.handoffs           counter: by distlock.via (local, server)
//
// Lock names are attributes of spans, not of metrics, unless
// [WithLockNames] says so.
//
// [Elections] is an election.Metrics (Config.Metrics): leader gauge, term,
// transitions and failed campaigns, by distlock.group. [PollLease] takes
// polllease Coordinators' events (Config.OnEvent): targets owned and
// uncertain, releases by distlock.reason (moves are rebalance), losses.
package otel
