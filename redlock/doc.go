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
// not stall it. An attempt fails as soon as failure is certain (more than
// N − quorum refusals or errors), and then gives the lock back on every
// server that granted it or failed after its request may have run. A
// request can also land after the attempt was decided: a paused server
// answers when it resumes, and go-redis redials a refused connection (5
// tries, 100 ms apart, by default; Options.DialerRetries), so a call to a
// server that is down may reach it once it is back. Such a late grant is
// extended and released with the handle when the acquire succeeded, and
// given back as it lands otherwise.
//
// An acquire has at most one call in flight per server: the next attempt
// of a waiting Acquire skips a server still answering an earlier one, and
// a give-back or withdrawal goes to a server only once its last call
// answered, so it never meets a later attempt's grant on its way. So no
// attempt waits for a paused server: between attempts a waiter reads the
// late replies for at most 100 ms, and an acquire that fails, or whose
// context ends, returns as a Release does (below), a grace after a
// majority confirmed. With one of three servers paused, a TryAcquire of a
// held lock fails in about 100 ms, and an Acquire bounded by 300 ms
// returns after about 400 ms.
//
// A held lock is extended on every server every TTL/3 through kit.Keeper
// (all handles of a Provider that fall due together share one pipeline per
// server). The handle is lost when a majority says the grant is gone, or
// when the trust window (last successful extension start + TTL − drift
// margin) closes without a majority extension. Release deletes the grant on
// every server, each after its acquire reply arrived (a delete sent before
// could pass a grant still on its way). It returns once a majority
// confirmed and every server that had answered the acquire answered, or a
// short grace after the majority (twice the time that took, at least
// 100 ms), so a paused server delays it by the grace only; the deletes on
// servers that answered the acquire late finish in the background.
//
// # Waiting
//
// Only the first waiting Acquire of a Provider contends on the servers.
// It lines up on every server under one ticket, its clock's time in µs
// when it started waiting, sent alike to all of them, so every server has
// the same waiters in the same order. A server grants a free mutex only to
// its first live waiter, and a release there hands the lock to that waiter,
// for the waiter's TTL, with a token from the server's counter (see
// Fencing), and announces the token on an inbox channel of the waiter's
// Provider that no other process hears. The waiter holds the lock once a
// majority of the servers announced a handover it can trust, without a
// round trip of its own (one more when their counters disagree): the
// handover of one release reaches it one parallel round after the release
// started, where waiters that raced after each release would split the
// servers' votes and all retry.
//
// A server's handover is trusted when the waiter's last call there
// answered, with no call of it in flight since, and the handover's token
// is above the name's counter in that answer: counters only grow and
// every grant advances them, so the handover was made after the answer,
// after the call was sent. The lease of a lock held from handovers
// therefore starts when the earliest of those calls was sent, and it
// counts only while the minimum validity remains. A waiter handed the
// lock by fewer than a majority waits 20 ms for the other announcements,
// then tries every server itself, which claims the handovers made to it.
// A server still young (see the guard below) hands nothing over: it
// announces the waiter's turn, and the waiter takes the lock on every
// server.
//
// A mutex waiter whose first try found the lock held does not try again
// until a handover or its turn is announced, where its Provider's
// subscriptions to every server ran from before that try; otherwise a
// release in between may have gone unheard, and it tries again at once
// after subscribing. Because handovers are announced, a mutex waiter's
// fallback retries start at 100 ms at least, whatever the backoff's
// minimum: with many waiters, each retry a script call on every server,
// frequent retries cost more than they save. Each attempt refreshes the
// waiter's place for max(1 s, 3 × the backoff's maximum). A waiter that
// gives up leaves every line before its Acquire returns, and releases
// what was handed to it; one whose process died or froze can be handed
// the lock, which is then held back until that grant expires (a TTL), as
// for a holder that died. Waiters on machines whose clocks run behind are
// served first: the order is the same on every server, not fair across
// clocks. Readers and writers of an RWMutex wait as before, on
// announcements that wake them all.
//
// # Fencing
//
// Each server keeps a durable counter per name, advanced in the same round
// trip as a grant to max(its value + 1, the server's time in µs rounded up
// to a quantum: an eighth of the guard, at most a second; the µs without a
// guard). The token is the largest counter of the granting majority,
// written back to the servers of that majority that had less. That extra
// round trip is rare: counters that agree advance to the same value on
// servers whose clocks read the same quantum. Any two majorities share a
// server, so while that server keeps its counter a later grant gets a
// larger token. A server that lost its counter starts again from its
// clock, and the young-server guard below keeps it out of majorities for a
// TTL after: so tokens keep increasing whichever servers lost their
// counters, as long as the servers' clocks differ by less than three
// quarters of the guard (TTL).
// Counter keys are small and never expire.
//
// # Restarts: the young-server guard
//
// A server that restarts without its data (no persistence, or AOF fsync
// everysec losing the last second) forgets grants their holders still
// count, and a second client could win a majority with it. Each server
// therefore keeps a boot marker key, written by the first acquire that
// finds it missing: until the guard (WithRestartGuard, default TTL) has
// passed since, the server still grants and blocks others, but its grants
// do not count toward an acquire's majority. By then every grant it lost
// has expired. A holder's extensions place its grant again on a young
// server that lost it when the lock is free there, and count it (that
// holder's lease is trusted, so no one else holds a majority), so rolling
// restarts, one server at a time, do not take the lock from its holder.
// The first acquire on a new deployment waits for the guard too (an
// operator may set the marker to 0 on servers known to have kept their
// data).
//
// # Deployment
//
// Use N independent servers (3 or 5), not replicas of one another, each a
// single Redis server (the boot marker has no hash tag: not a Cluster).
// Exclusion holds while a majority is up; it survives restarts without
// persistence thanks to the guard, as long as every Provider on the
// servers uses the same TTL (or a guard at least as long as the longest
// TTL) and the servers' clocks run at the same rate (a clock that jumps
// forward shortens the guard and the grants' lives alike). With AOF and
// appendfsync always, the guard may be turned off (WithRestartGuard(0)).
// Set the TTL above the time a server takes to restart plus the clock
// drift margin; keep clocks synchronized for the tokens (see Fencing).
//
// # Membership and Inspector
//
// The Provider implements core.Membership, core.Heartbeater and
// core.Announcer by the same majority rule as its locks: a registration is
// sent to every server and succeeds when a majority took it, and an id is
// live when a majority of the N servers list it, each by its own clock, so
// polllease and election run over RedLock as over one server. Each server
// keeps a group as redislock does (redisop's scripts): Register,
// Heartbeat, Announce and Members cost one script call per server, in
// parallel, one round trip; Announce writes the value with the
// registration and reads every live member's value in the same call.
//
// A member's value is chosen among the servers that list it. Every
// registration (Register and Heartbeat with an empty value, Announce with
// its value) carries one stamp to every server: the Provider's clock in µs,
// or its last stamp + 1 when that is larger. Of the entries the answering
// servers hold for a live id, the value is:
//
//  1. the value (compared byte for byte) held by at least a majority of all
//     N servers, when there is one (there can be only one);
//  2. otherwise, the value of the entry with the largest stamp (among equal
//     stamps, the larger value byte for byte).
//
// An Announce (or Register) that succeeded left its value on a majority,
// and any two majorities share a server, so an older value cannot hold a
// majority beside it: a stale value on a minority of servers never wins,
// even when only a majority answered and the stale servers are most of
// those (rule 1 counts all N, not the servers that answered). A newer
// registration that reached only a minority (it failed) shows only where
// no value holds a majority. Stamps from different Providers compare their
// clocks: two processes announcing one id are ordered by their clocks, so
// give each process its own id. A server takes every registration it
// receives, whatever its stamp, so a request that lands after a later one
// (a call that timed out on its way) writes the older value there until
// the next registration.
//
// Mutexes and write sides implement core.Inspector: Holder reports the
// grant a majority holds, with the identity of its Provider (WithIdentity)
// and its token.
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
