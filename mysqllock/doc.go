// Package mysqllock is the MySQL and MariaDB backend of distlock: mutexes
// and semaphores on user-level locks (GET_LOCK), with fencing tokens, a
// handle whose context dies when the lock is lost, and core.Membership
// and core.Announcer, over database/sql with github.com/go-sql-driver/mysql.
//
// # Locks and names
//
// A user-level lock is named by a string of at most 64 characters (MySQL's
// limit), server-wide: every database of the server shares the names. A
// distlock name becomes "dl/m/" (a Mutex) or "dl/s<i>/" (slot i of a
// Semaphore) followed by kit.SafeName(name) shortened to fit: a readable
// prefix and 130 bits of SHA-256 of the exact name, so any name (long,
// differing only in case, any bytes) has its own lock, and every process
// derives the same one. A Mutex and a Semaphore of the same name are
// distinct locks.
//
// A semaphore is max slot locks; a holder holds one. A try asks for every
// free slot in one statement (CASE stops at the first GET_LOCK that
// grants). The server cannot queue a waiter for "any free slot", so a
// waiting Acquire queues for one slot at a time, picked at random, for at
// most 100 ms, then tries them all again: the slot it queues for is handed
// over by the server at once, another slot within about 100 ms.
//
// RWMutex is not offered: GET_LOCK has no shared mode, and both of its
// acquire calls fail with core.ErrUnsupported (see Provider.RWMutex).
//
// # Connections
//
// A user-level lock belongs to the session that took it, so a Provider pins
// its own few connections from the *sql.DB (db.Conn; WithMaxConns bounds
// them) and never returns them while they hold locks. Held locks share
// these connections: thousands of locks can sit on one. A try runs on a
// shared connection; a blocking wait runs on a connection that holds
// nothing, so that releases of other locks never queue behind it, and waits
// in the server's own queue (GET_LOCK with a timeout following ctx's
// deadline), which hands the lock over in about one round trip. When ctx is
// cancelled, or its deadline passes before the server's timeout fires, a
// KILL QUERY on another connection of the pool ends the wait and leaves the
// session in service; only when that fails is the connection closed. Then,
// or when the grant statement fails, the session is checked with
// IS_USED_LOCK and the lock released if the server granted it as the wait
// ended. GET_LOCK is reentrant per session; mysqllock's locks are not: a
// Provider tracks the locks each connection holds and never asks a
// connection for a lock it already holds. Statements run prepared, once per
// connection, so each costs one round trip. On go-sql-driver/mysql's
// connections they are prepared on and run by the driver's connection
// itself (sql.Conn.Raw), without database/sql's work around each statement,
// which costs about as much client CPU as the rest of a grant; other
// drivers run them through database/sql. A statement on a shared
// connection is bounded by WithTimeout, never by the caller's ctx: the
// driver cancels a statement by closing its connection, which would end
// the session of every lock on it. The bound is a deadline on the
// connection's socket, kept between 3/4 of WithTimeout and WithTimeout
// ahead, and the statement runs with a context that cannot be cancelled,
// which neither database/sql nor the driver has to watch (a watched
// context costs each statement goroutine hand-offs, as much as the round
// trip itself on a busy machine); a statement that overruns it fails and
// its connection is failed. The driver does not export its socket: the
// Provider reads it from go-sql-driver/mysql's connection, and a driver
// without it gets a context deadline per statement instead. A readTimeout
// or writeTimeout in the DSN replaces the socket deadline for each read or
// write, and bounds every blocking wait too (the driver gives up on the
// connection, and the wait fails): leave them unset, and bound waits with
// ctx.
//
// # Local handoff
//
// When a Mutex is released while an Acquire of the same Provider waits for
// it, the release leaves the lock on its session and hands the grant to
// that waiter: no RELEASE_LOCK, no server wake-up, no new GET_LOCK. The
// release draws the waiter's token on the holder's session with a
// statement that draws only while IS_USED_LOCK names that session
// (NEXTVAL, or with WithFenceTable an UPDATE of the counter row; one round
// trip): the token is greater than every earlier grant's, and a session
// killed from outside hands nothing on. A Provider's
// waiters for one lock line up locally in arrival order; only the first one
// contends, and while a local grant holds the lock it waits locally for the
// handoff rather than in the server's queue. Other sessions are only
// granted the lock when it is released, so a run of handoffs is bounded: at
// most WithLocalHandoff grants in a row after the first (default 8), and
// none once the run has lasted 20 ms; WithLocalHandoff(0, 0) turns them
// off. A handed-on grant lives on the same connection as its predecessor
// and is lost with it.
//
// # Loss detection
//
// A lock lives as long as its session (core/kit's Sessions, which pglock
// shares). Each connection that holds locks is pinged (COM_PING) every
// keepalive period (WithKeepalive, default 2 s) by
// one goroutine per Provider; a failed ping or any failed statement closes
// the connection and cancels the context of every handle on it with
// core.ErrLockLost. A KILL of the session or a server restart is thus
// reported within one keepalive period, a cut network within two (a ping
// that gets no answer within a period fails), and a process that dies
// frees its locks as soon as the server sees its connections close.
//
// # Fencing
//
// Every grant of every primitive draws its token from one MariaDB sequence,
// created on first use:
//
//	CREATE SEQUENCE IF NOT EXISTS distlock_fence_seq INCREMENT BY 1 CACHE 1000
//
// (WithFenceSequence renames it). The statement that takes a lock draws the
// token only when GET_LOCK grants, in the same round trip (SELECT CASE WHEN
// GET_LOCK(...) = 1 THEN NEXTVAL(...) END), and writes no row. Tokens
// therefore increase across all locks, and so within each.
//
// NEXTVAL serves a block of 1000 values from memory and writes the
// sequence's row when it starts a block; after a restart the sequence goes
// on above every block its row recorded. That write is not committed with
// the statement that draws, though: its redo record waits for the next
// commit on the server (or the log flush once a second), so a crash soon
// after a block starts would hand the block's values out again. So a
// Provider confirms each block it draws from before it returns a token
// from it: it commits a row of a one-row table beside the sequence
// (distlock_fence_seq_mark) on the connection that drew, whose redo record
// follows the block's and is written with it. That is one round trip per
// block of 1000 tokens a Provider draws from. Tokens of one lock thus
// strictly increase across processes, server restarts and crashes of the
// server process (with innodb_flush_log_at_trx_commit = 2 or 1), and
// crashes of its machine (with 1, and sync_binlog = 1 with a binary log).
//
// MySQL has no sequences: there, and wherever the holder must be told
// (core.Inspector), WithFenceTable keeps one counter row per lock in a
// small InnoDB table, created on first use:
//
//	CREATE TABLE IF NOT EXISTS distlock_fence (name VARBINARY(64) PRIMARY KEY,
//	  token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB
//
// The statement that takes a lock bumps its row only when GET_LOCK grants,
// in the same round trip (INSERT ... SELECT ... WHERE GET_LOCK(...) = 1 ...
// ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)), and records
// the holder's identity (WithIdentity) and connection id. The Provider's
// sessions run with autocommit, so the bump is committed before the grant
// is returned; it costs a row write and a commit per grant. Tokens of one
// lock then count its grants, strictly increasing across processes and
// restarts, durable as the server's commits are.
//
// # Inspector
//
// With WithFenceTable, a Mutex implements core.Inspector: Holder reads the
// counter row whose recorded connection id is the one IS_USED_LOCK reports,
// in one round trip, and so names the identity and token of the grant that
// holds the lock. With the sequence no row records the holder, and the
// Locker does not implement it.
//
// # Cost
//
// TryAcquire: one round trip (GET_LOCK and the token in one statement; with
// WithFenceTable also a row write and a commit). Acquire: one round trip
// when the lock is free; otherwise one more statement that returns when the
// lock is granted. Release: one round trip; a release that hands the lock
// to a local waiter one (the token draw) instead. Keepalive: one round trip
// per connection holding locks per period, however many locks it holds. An
// abandoned wait: a KILL QUERY on a connection of the pool.
//
// # Membership
//
// Provider implements core.Membership and core.Announcer on a small table
// (WithMembersTable), one row per member, whose expiry uses the server's
// UTC_TIMESTAMP(6), for polllease. A member's announced value is kept in
// the row's MEDIUMBLOB column; Register empties it. The statements are
// prepared once per connection of the pool: Register, Deregister and
// Members are one round trip each, Announce two (an upsert, then a read of
// the group's other live members, whose values it returns; MySQL has no
// statement that writes a row and lists a table). A table made by an
// earlier version, without the value column, gets it on a Provider's first
// call (ALTER TABLE, only when information_schema shows it missing); its
// rows read as empty values. Where the Providers' user lacks the ALTER
// privilege on the table, membership works without values: Register,
// Members and Deregister (and so core.Heartbeat) work, Announce fails with
// an error matching core.ErrUnsupported, writing nothing, and the Provider
// logs one warning (WithLogger) naming the statement that adds the column,
// ALTER TABLE <table> ADD COLUMN value MEDIUMBLOB. polllease then
// heartbeats without values. A Provider opened after the column is added
// uses it: restart every instance of a polllease fleet then, since until
// all announce, the instances that do and those that do not assign from
// different owners (safe, as leases stay exclusive, but targets move
// more). The table is created only when information_schema does not
// show it, so a user that may only read and write it (SELECT, INSERT,
// UPDATE, DELETE) needs no CREATE privilege. A Register or Announce also
// deletes its group's rows that expired over an hour before, at most once
// a minute per Provider (one more round trip then).
//
// # Servers
//
// Tested on MariaDB 10.11. MySQL 5.7 and later share the statements used
// with WithFenceTable (multiple user-level locks per session,
// LAST_INSERT_ID(expr), fractional GET_LOCK timeouts); MariaDB before 10.3
// has no sequences either. The user needs to create the sequence or table
// and the members table, or have them created: each is created only where
// it is missing, so a user that may only read and write them (SELECT,
// INSERT, UPDATE, DELETE; the sequence's mark table too) needs no CREATE
// privilege. It also needs to KILL QUERY its own sessions, which every
// user may. Behind a proxy that multiplexes sessions (ProxySQL, MaxScale in
// some modes) user-level locks do not belong to a client's session: use a
// direct connection.
package mysqllock
