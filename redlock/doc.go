// Package redlock is the RedLock algorithm over N independent Redis servers:
// a lock is held when a majority of the servers (N/2+1) granted it within
// the acquire budget, so it survives the loss of a minority of servers.
//
// # Algorithm
//
// Acquire sends the single-server acquire script of package redisop to
// every server in parallel with one random 128-bit owner value. It succeeds
// as soon as a majority granted within the acquire budget (TTL − minimum
// validity; defaults 30 s − 27 s = 3 s), so a returned handle still has at
// least the minimum validity on a majority, and a slow or paused server does
// not stall it. It fails as soon as failure is certain (more than N − quorum
// refusals or errors), and then releases the lock on every server, since a
// request whose reply was lost may still have been granted.
//
// A held lock is extended on every server every TTL/3 through kit.Keeper
// (all handles of a Provider that fall due together share one pipeline per
// server). The handle is lost when a majority says the grant is gone, or
// when the trust window (last successful extension start + TTL − drift
// margin) closes without a majority extension. Release deletes the grant on
// every server and returns once a majority confirmed.
//
// # Fencing
//
// Each server keeps a durable counter per name, incremented in the same
// round trip as a grant. The token is the largest counter of the granting
// majority, written back to the servers of that majority that had less
// (an extra round trip only when the counters disagree, which they stop
// doing after the first write-back). Any two majorities share a server, so
// a later grant always reads a counter at least as large as the last token
// and gets a larger one. This holds as long as counter keys survive server
// restarts (Redis with AOF persistence), which is the same assumption
// RedLock's own safety makes. Counter keys are small and never expire.
//
// # Semaphores
//
// Semaphore returns a Locker that fails with core.ErrUnsupported when N > 1:
// a majority vote does not preserve a semaphore's bound. With max slots on
// each server, two disjoint sets of holders can each win a different
// majority of slots (on 5 servers with max 1, holder A on servers 1-3 and
// holder B on servers 3-5 cannot both succeed, but with max 2 and four
// holders, A and B on 1-3 and C and D on 3-5 are all granted while server 3
// has only two slots: four holders of a two-slot semaphore). With N = 1 the
// semaphore is the single server's and works.
package redlock
