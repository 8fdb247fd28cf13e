// Package pglock is the PostgreSQL backend of distlock: mutexes,
// reader-writer locks, semaphores and transaction-scoped locks on
// PostgreSQL advisory locks, with fencing tokens and a handle whose context
// dies when the lock is lost, through github.com/jackc/pgx/v5.
//
// # Locks and keys
//
// An advisory lock is named by a key: one int64, or a pair of int32 (two
// distinct key spaces). KeyOf maps a name to a key: a name in canonical key
// form ("00000000000004d2", "000004d2,ffffffff") is that key; a name of up to
// 9 ASCII characters is packed losslessly into the pair space; anything else
// is hashed with SHA-256 into the int64 space. MutexKey and RWMutexKey take a
// Key directly, to share a lock with other clients that use the same numbers.
//
// Mutex(name) locks KeyOf(name). RWMutex(name) and Semaphore(name, max)
// derive their keys from it by hashing, so a mutex, a reader-writer lock
// and a semaphore of the same name are distinct locks. The reader-writer
// lock is pg_advisory_lock (write) and pg_advisory_lock_shared (read): the
// server queues a new reader behind a waiting writer, which is writer
// preference. A semaphore is max exclusive slot keys; a holder holds one.
// Its waiters cannot queue on the server for "any free slot", so they retry
// the slots, woken by every release: the release statement sends a NOTIFY
// that each Provider with waiting semaphores LISTENs for on one connection
// of its own.
//
// # Connections
//
// Session advisory locks belong to the connection that took them, so a
// Provider keeps its own few long-lived connections, opened with its pool's
// config (WithMaxConns bounds them; the pool itself only serves the fence and
// membership tables). Held locks share these connections: ten thousand
// locks can sit on one. A try-lock runs on a shared connection; a blocking
// wait runs on a connection that holds nothing, so that releases of other
// locks never queue behind it, and it waits in the server's own queue
// (pg_advisory_lock), which hands the lock over in about one round trip. A
// context deadline up to 10 s becomes the statement's lock_timeout (set in
// the same statement as the lock call); a cancelled or later deadline sends a
// cancel request. Either way the session is then checked in pg_locks and the
// lock released if the server granted it as the wait ended. PostgreSQL's
// advisory locks are reentrant per session; pglock's are not: a Provider
// tracks the keys each connection holds and never asks a connection for a key
// it already holds.
//
// # Local handoff
//
// A session advisory lock belongs to its connection, not to a handle. So
// when an exclusive lock (Mutex, MutexKey, the write side of RWMutex) is
// released while an Acquire of the same Provider waits for it, the release
// leaves the lock on its connection and hands the grant to that waiter: no
// unlock, no server wake-up, no new lock call. The release draws the
// waiter's token from the fence sequence on the holder's connection (one
// round trip), which succeeds only while that session, and with it the
// lock, lives: the token is greater than every earlier grant's, and a
// session terminated from outside hands nothing on. A Provider's waiters for
// one key line up locally in arrival order; only the first one contends,
// and while a local exclusive grant holds the key it waits locally for the
// handoff rather than in the server's queue.
//
// Waiters of other sessions are only granted the lock when it is unlocked,
// which a handoff never does. A run of local handoffs is therefore bounded:
// at most WithLocalHandoff grants in a row after the first (default 8), and
// none once the run has lasted 20 ms; the release that ends the run unlocks,
// and the server grants the lock to the first session in its queue. A
// waiter elsewhere is thus passed over for at most that many local grants,
// or about 20 ms plus one hold, per unlock. WithLocalHandoff(0, 0) turns
// handoffs off. They are off with WithFenceTable, whose grants each write
// their own counter row and holder. A handed-on grant lives on the same
// connection as its predecessor and is lost with it, like every grant on it.
//
// # Loss detection
//
// A lock lives as long as its session (core/kit's Sessions, which
// mysqllock shares). Each connection that holds locks is pinged every
// keepalive period (WithKeepalive, default 2 s) by one
// goroutine per Provider (liveness is per connection, so it pings
// connections, not locks); a failed ping or any failed statement closes the
// connection and cancels the context of every handle on it with
// core.ErrLockLost. A pg_terminate_backend or a server restart is thus
// reported within one keepalive period (the next ping fails at once), a
// cut network within two (a ping that gets no answer within a period
// fails), and a process that dies frees its locks as soon as the server
// sees its connections close.
//
// # Fencing
//
// Every grant of every primitive draws its token from one sequence, created
// on first use where it is missing:
//
//	CREATE SEQUENCE IF NOT EXISTS distlock_fence_seq
//
// (WithFenceSequence renames it). Tokens therefore increase across all locks,
// and so within each. Drawing one writes no row, and only one draw in 32
// waits for a WAL flush, so a handover costs about what a bare
// pg_advisory_lock does. WithFenceTable instead keeps one counter row per
// lock in a small table, created on first use where it is missing:
//
//	CREATE TABLE IF NOT EXISTS distlock_fence (key text PRIMARY KEY, token bigint NOT NULL, holder text)
//
// and records in the row the identity (WithIdentity) of the grant that took
// its token, which Holder (core.Inspector) reports for a Mutex or an
// RWMutex's write side; it costs a row write and a commit per grant. Either
// way the token is drawn in the same statement as the lock call, only when
// the lock is granted, and is durable before the grant is returned: the
// Provider's own sessions run with synchronous_commit on, whatever the
// server's default, so tokens of one lock strictly increase across
// processes, server restarts and crashes. A transaction-scoped grant draws
// its token on the pool, outside the caller's transaction, so that a
// rollback cannot hand its token out again; there the pool's sessions
// decide durability: keep synchronous_commit on for them (the server
// default) if tokens must survive a crash. A counter row's key is "k:" plus
// the advisory key's canonical form for mutexes and reader-writer locks
// (readers and writers share it), and "s:" plus the name's key for a
// semaphore.
//
// # Cost
//
// TryAcquire: one round trip. Acquire: one round trip when the lock is free;
// otherwise one more statement that returns when the lock is granted.
// Release: one round trip (for a semaphore it also sends the NOTIFY); a
// release that hands the lock to a local waiter usually none, at most one.
// Keepalive: one round trip per connection holding locks per period, however
// many locks it holds.
//
// # Transactions and PgBouncer
//
// TryAcquireTx and AcquireTx take a transaction-scoped lock on a caller's
// pgx.Tx; it ends with the transaction. They work behind PgBouncer in
// transaction pooling mode, where session locks do not.
//
// # Membership
//
// Provider implements core.Membership, core.Heartbeater and core.Announcer
// on a small table (WithMembersTable), one row per member, whose expiry
// uses the server's now(), for polllease. A member's announced value is
// kept in the row's bytea column; Register and Heartbeat empty it. Every
// call is one statement, one round trip: Heartbeat and Announce upsert the
// member and list the group's live members in the same statement, and
// Announce sends back the values of the other members only. A table made
// by an earlier version, without the value column, gets it on a
// Provider's first call (ALTER TABLE, which needs the table's owner); its
// rows read as empty values. Where the Providers' role may use the table
// but not alter it, a Provider logs one warning naming the table and the
// statement its owner can run (ALTER TABLE <table> ADD COLUMN value bytea)
// and goes on without values: Register, Heartbeat, Members and Deregister
// work, and Announce fails with an error matching core.ErrUnsupported,
// registering nothing, so polllease falls back to heartbeats. Providers
// opened after the column is added use it: restart every instance of a
// polllease fleet then, since until all announce, the instances that do
// and those that do not assign from different owners (safe, as leases stay
// exclusive, but targets move more). Such a role needs no CREATE on
// the schema either: the table is created only where it is missing.
//
// # Privileges
//
// A Provider creates the fence sequence or table and the members table on
// first use only where they are missing (to_regclass finds no relation of
// that name), which needs CREATE on the schema: PostgreSQL requires it for
// CREATE ... IF NOT EXISTS even when the object exists, and since version
// 15 PUBLIC lacks it on schema public. A role that only uses objects a
// migration role created beforehand, in the layouts above and in
// WithMembersTable's, needs no CREATE: it needs USAGE on their schema,
// USAGE on the fence sequence (or SELECT, INSERT, UPDATE on the fence
// table), and SELECT, INSERT, UPDATE, DELETE on the members table if it
// uses membership. Advisory locks, LISTEN and NOTIFY need no privilege. A
// fence table made by an earlier version, without the holder column, gets
// it on first use, which needs the table's owner: until its owner adds it
// (ALTER TABLE <table> ADD COLUMN holder text), every acquire of a role
// that does not own it fails.
package pglock
