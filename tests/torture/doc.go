// Package torture is distlock's cross-backend torture test: the test a
// skeptical user would run before trusting a lock library.
//
// For each backend, N worker processes (the test binary re-executed in
// worker mode, not goroutines) hammer one mutex. Inside each critical
// section a worker does a read-modify-write of a counter kept by a fenced
// resource, a small HTTP server in the test process:
//
//	POST /enter?w=W&t=T     read: the counter, if T >= the highest token seen
//	POST /write?w=W&t=T&v=V write: counter = V, if T >= the highest token seen
//
// The resource records every critical section (worker, token, first and
// last event) on one event clock and refuses any request whose fencing token
// is lower than the highest it has accepted, as a storage system that
// honours fencing tokens would. From the record it reports:
//
//   - overlaps: two critical sections that were open at once. A lock
//     without leases (filelock, pglock) must show none; a lease lock may,
//     when a holder is paused beyond its TTL, and then every overlap must
//     be caught: the older holder's write refused.
//   - stale writes refused: requests turned away by the fencing check.
//   - lost updates: accepted writes whose value was not the counter + 1,
//     and any difference between the counter and the accepted writes. Must
//     be 0 whatever the fault.
//   - reused tokens: one token granted to two critical sections. Must be 0.
//
// Workers do not check their handle's context before writing: they act as
// the naive client that fencing exists to protect against.
//
// While the workers run, the test injects faults: a worker SIGSTOPped
// inside its critical section for longer than the TTL and then resumed (a
// GC pause), a worker SIGKILLed while holding, and per backend a Redis
// server killed and restarted or SIGSTOPped beyond the TTL, a minority and
// then a majority of RedLock's servers lost, RedLock's servers restarted
// empty under a holder (a rolling restart, Kleppmann's case), a Sentinel
// master killed (after its replica's link was cut, or under a holder) and
// its replica promoted, PostgreSQL backends terminated
// with pg_terminate_backend and the cluster crashed and restarted, a NATS
// server restarted. After each fault the run must make progress.
// Servers are the test's own (package tests/internal/launch: Docker through
// testcontainers-go when an engine answers, local binaries otherwise),
// never the shared ones `make test` starts.
//
// A summary table, backend × fault → operations, overlaps, stale writes
// refused, lost updates, is printed at the end. The default short mode
// keeps each backend under a minute; -torture.long runs more workers for
// longer, repeats each fault, and adds an RWMutex's write side and a
// semaphore of 1 to the mutex (fencing must hold for every primitive).
package torture
