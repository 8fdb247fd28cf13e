// Package redislock is the distlock backend for a single Redis deployment (a
// server, or a cluster through *redis.ClusterClient): mutexes, reader-writer
// locks and semaphores with fencing tokens, lease renewal and event-driven
// waiting, plus core.Membership, core.Heartbeater and core.Announcer for
// live-instance tracking.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	p, err := redislock.New(rdb, redislock.WithTTL(10*time.Second))
//	if err != nil { ... }
//	defer p.Close()
//
//	h, err := p.Mutex("invoice:42").Acquire(ctx)
//	if err != nil { ... }
//	defer h.Release(context.Background())
//	work(h.Context(), h.FencingToken())
//
// # How a lock lives in Redis
//
// Every grant is a lease: a key (mutex, write side) or a sorted-set member
// (reader, semaphore slot) holding a fresh 128-bit random owner value, with
// an expiry of one TTL. Each operation is one Lua script, one round trip:
// acquire checks and sets the grant and computes the fencing token in the
// same call; release deletes the grant only if its owner value still matches
// (so a stale handle never frees a later holder's grant) and PUBLISHes a
// wake-up. All keys of a name share a {hash tag} and one Redis Cluster slot;
// redisop.Client documents the key layout. Sorted sets are scored by expiry on the
// server's clock (TIME), so client clocks never decide who holds a lock.
//
// # Fencing tokens
//
// A token is the server's time in microseconds when the grant is made (for
// a mutex handed on within a Provider, when its token was drawn, while the
// key was held), or the name's last token + 1 when that is larger (a mutex
// handed straight to a waiter, concurrent readers or semaphore holders
// within one microsecond). It is strictly increasing for every grant of every primitive
// of a name, without a counter key that would have to outlive the locks:
// tokens keep increasing after the name was idle, after its keys expired,
// after a FLUSHALL or a restart of a server without persistence, as long as
// the server's clock does not step back further than the time between two
// grants of the name. Under WithReplicaAck every token is also kept above
// the name's durable counter (a key that never expires, one per name),
// which each grant's script raises in the write that the replicas
// acknowledge: a replica promoted by a failover then draws tokens above
// every acknowledged one, however far its clock is behind.
//
// # Leases, renewal and loss
//
// One kit.Keeper per Provider renews every held grant every renew interval
// (default TTL/3); the renewals that fall due together go out in one
// pipeline, so ten thousand held locks cost a few round trips per interval,
// not ten thousand. A renewal that finds the grant gone or owned by someone
// else ends the handle's context at once with core.ErrLockLost; renewals
// that fail (Redis unreachable) end it when the trust window closes: the
// start of the last successful renewal (or of the acquire) + TTL − drift
// margin. A holder whose process dies blocks others for at most the TTL.
//
// # Waiting
//
// The mutex waiters of one Provider line up locally in arrival order, and
// only the first contends. While a grant of the same Provider holds the
// mutex, that waiter waits locally and the release hands the key straight
// to it: same owner value in Redis, a new handle, and a fencing token drawn
// from the server in the background while the key was held (so it is
// larger than every earlier token and smaller than any token granted after
// the key is released): no round trip. Waiters in other processes are granted the lock
// only by a release that runs the release script, so a Provider hands a
// mutex on locally at most WithLocalHandoff times in a row (default 8) and
// for at most 20 ms; the next release runs the script.
//
// Acquire on a mutex held elsewhere joins the lock's FIFO wait queue in
// Redis; a release hands the lock straight to the first live waiter (a
// handoff costs the release's round trip and one pub/sub message, no
// further round trip) and announces it on the waiting Provider's own
// channel, so no other process wakes. The Provider keeps one pub/sub subscription (one
// connection, whatever the number of locks and waiters) to that channel and
// the channel shared by all Providers with the same prefix while some
// Acquire waits. Waiters of reader-writer locks and semaphores retry when a
// release is announced on the shared channel. Without a signal a waiter retries with
// jittered backoff (kit.DefaultBackoff), never later than the holder's
// grant expires, so a lost message costs latency, never the lock. A waiter
// that gives up leaves the queue; a waiter that dies in it is skipped once
// its entry expires (about a second), though a lock handed to it just before
// stays blocked for a TTL, as if it had died right after acquiring. A
// waiting writer of a reader-writer lock sets a short-lived marker that
// keeps new readers out (writer preference). The context passed to Acquire
// only bounds the wait; an unreachable server fails the call at once with
// the driver's error, wrapped in a *core.Error. TryAcquire never queues and
// may take a lock whose previous holder expired ahead of queued waiters.
//
// # Who holds a lock
//
// Mutex and the write side of RWMutex implement core.Inspector: Holder
// reports the holder's identity (WithIdentity, by default
// kit.DefaultIdentity()) and fencing token in one GET, so election can
// name its leader and polllease can confirm a lease on the store. The
// identity travels in the grant's owner value. Semaphores and the read side
// have many holders and do not implement it.
//
// # Membership
//
// The Provider implements core.Membership, core.Heartbeater and
// core.Announcer. A group keeps two keys under its name's {hash tag}: a
// sorted set of member ids scored by expiry on the server's clock, and a
// hash of each id's value (byte for byte, behind an 8-byte stamp that only
// redlock uses). Register, Heartbeat and Announce are one script call each,
// one round trip: they purge the expired members with their values, write
// the id's expiry and value (empty for Register and Heartbeat), and
// Heartbeat lists the live ids, Announce the live ids with their values,
// read after the write; Members is one script call, Deregister one. Both
// keys live a TTL past the group's last registration. A group written by a
// version that kept no values needs no migration: its ids are listed with
// empty values until they announce, and while both versions run, a value
// whose id an older Provider purged or deregistered is dropped at the next
// registration.
//
// # Deployment
//
// What holds depends on how the Redis behind the client is run.
//
//   - One server. Exclusion holds while the server runs. A restart without
//     persistence (or with AOF fsync everysec, which may lose the last
//     second) loses the grants: a holder keeps a live handle until its next
//     renewal fails, at most TTL − drift margin, while another client may
//     already hold the lock; fencing tokens stay increasing as long as the
//     server's clock has not stepped back further than the time since the
//     last grant. With AOF and appendfsync always, nothing is lost.
//   - Sentinel or replicas (redis.NewFailoverClient). Replication is
//     asynchronous: a master that dies before a grant reached its replica
//     leaves a promoted replica without it, and a second client gets the
//     lock while the first holds a live handle (until the first's next
//     renewal finds the grant gone). WithReplicaAck(n, timeout) removes
//     this: a grant counts only once n replicas acknowledged it (WAIT on
//     the grant's connection), so the promoted replica has it as long as
//     Sentinel promotes one of the replicas that acknowledged (n = the
//     number of replicas, or a majority of them with min-replicas settings).
//     No grant is made while fewer than n replicas are connected: with one
//     replica, none from the failover until a server is back as the new
//     master's replica (waiters keep waiting), so run n + 1 replicas to go
//     on granting through a failover. With WithReplicaAck, fencing tokens also increase across a failover
//     whatever the promoted replica's clock says: each grant raises the
//     name's durable counter in the write the replicas acknowledge, and
//     the next token is above it (every Provider of a name must use the
//     option, since only its scripts raise the counter). Without it the
//     token comes from the server's clock alone and increases only while
//     the promoted replica's clock is not behind the old master's by more
//     than the time between the two grants. A waiting Acquire rides through
//     the failover (connection errors, READONLY, LOADING are retried on the
//     busy-lock backoff within the caller's context); a holder whose renewals
//     fail for longer than its trust window loses its handle. Set the TTL
//     well above Sentinel's failover time (down-after-milliseconds plus the
//     election), or holders lose their locks at every failover.
//   - Cluster (redis.NewClusterClient). A lock's keys share one hash slot,
//     so each lock lives on one shard, with the single-server and replica
//     guarantees above per shard; WithReplicaAck is not available (the
//     cluster client may send WAIT to another connection than the grant).
//   - N independent servers: use package redlock, which tolerates the loss
//     of a minority.
//
// # Errors
//
// Acquire calls return a *core.Error naming the backend ("redis"), the
// operation and the lock. It matches core.ErrNotAcquired when the lock is
// busy (and ctx.Err() too when the wait was cut short), core.ErrInvalidName
// for an empty or non-UTF-8 name, core.ErrInvalidArgument for a semaphore
// size below 1, and otherwise wraps the go-redis error (or says that the
// Provider was closed). A grant that WithReplicaAck's replicas did not
// acknowledge in time is given back and matches core.ErrNotAcquired.
//
// # Building other backends
//
// Package redisop holds the single-server operations under Provider
// (acquire, extend, batch extend, release, membership) on one
// redis.UniversalClient, without waiting or renewing, and the pub/sub
// Waker; a multi-server algorithm such as RedLock drives one redisop.Client
// per server and reuses kit's Keeper and Wait on top.
package redislock
