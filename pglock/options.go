package pglock

import (
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5"
)

// Defaults, in one place.
const (
	// DefaultFenceSequence is the sequence fencing tokens are drawn from
	// unless WithFenceTable is given.
	DefaultFenceSequence = "distlock_fence_seq"
	// DefaultFenceTable is the table of per-lock fencing counters that
	// WithFenceTable(DefaultFenceTable) selects.
	DefaultFenceTable = "distlock_fence"
	// DefaultMembersTable holds the Membership registrations.
	DefaultMembersTable = "distlock_members"
	// DefaultKeepalive is how often a connection that holds locks is pinged;
	// a lost connection is reported within about twice this.
	DefaultKeepalive = kit.DefaultSessionKeepalive
	// DefaultMaxConns bounds the connections a Provider opens for holding
	// and waiting (its pool's own connections are not counted).
	DefaultMaxConns = kit.DefaultSessionMaxConns
	// DefaultTimeout bounds one statement on a connection that holds locks
	// (a try-lock, a release), so a server that stopped answering fails the
	// call instead of hanging it.
	DefaultTimeout = kit.DefaultSessionTimeout
)

// options are the shared options of a backend on kit.Sessions.
type options = kit.SessionConfig

// Option configures a Provider.
type Option func(*options)

// WithFenceTable draws fencing tokens from a table of counters, one row per
// lock, named name (DefaultFenceTable is the usual choice), instead of the
// default sequence. Each row also records the identity of the grant that
// took its token, which is what lets Mutex and the write side of RWMutex
// report their holder (core.Inspector: election's Leader, polllease's strict
// ownership check and snapshot). The price is a row write and a commit in
// every grant's statement: about 60 µs more per uncontended acquire and
// about 3 points of utilization on a busy lock in our measurements (see the
// README).
//
// The name may be schema-qualified ("locks.fence"); each part must be a
// plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes). The
// Provider creates the table on first use where it is missing, so its role
// needs the right to create it, or someone creates it beforehand, and the
// role then needs only SELECT, INSERT, UPDATE on it (see Privileges in the
// package documentation):
//
//	CREATE TABLE distlock_fence (key text PRIMARY KEY, token bigint NOT NULL, holder text)
func WithFenceTable(name string) Option {
	return func(o *options) { o.FenceTable, o.FenceSeq = name, false }
}

// WithFenceSequence names the sequence fencing tokens are drawn from (the
// default source, DefaultFenceSequence), with the same rules as
// WithFenceTable. The Provider creates it on first use where it is missing;
// a role using a sequence created beforehand needs only USAGE on it.
//
// Tokens from one sequence increase across all locks rather than per lock,
// which still makes every lock's tokens strictly increasing. Drawing one
// writes no row: nextval logs to WAL once per 32 values, and the statement
// that logs is given a transaction ID, so its commit waits for the WAL flush
// before the token is returned (the Provider's sessions run with
// synchronous_commit on): tokens stay increasing across server crashes. A
// handover therefore costs no row write and, 31 times in 32, no commit
// flush. Locks of a Provider using a sequence do not implement
// core.Inspector: no row records the holder (see WithFenceTable). Every
// Provider sharing locks must use the same fence source.
func WithFenceSequence(name string) Option {
	return func(o *options) { o.FenceTable, o.FenceSeq = name, true }
}

// WithMembersTable names the table that Membership uses (default
// DefaultMembersTable), with the same rules as WithFenceTable:
//
//	CREATE TABLE distlock_members (grp text, id text, expires_at timestamptz NOT NULL, value bytea, PRIMARY KEY (grp, id))
//
// A table without the value column (made by an earlier version) gets it
// with ALTER TABLE ... ADD COLUMN on a Provider's first membership call,
// which needs the table's owner. A Provider whose user does not own it
// goes on without values: Announce fails with core.ErrUnsupported, and
// the other membership calls work (see the package documentation).
func WithMembersTable(name string) Option {
	return func(o *options) { o.MembersTable = name }
}

// WithKeepalive sets how often each connection that holds locks is pinged
// (default DefaultKeepalive). A failed ping, or any failed statement on the
// connection, cancels the context of every handle held on it with
// core.ErrLockLost.
func WithKeepalive(d time.Duration) Option {
	return func(o *options) { o.Keepalive = d }
}

// WithMaxConns bounds the connections the Provider opens for holding and
// waiting (default DefaultMaxConns, at least 2). Held locks share
// connections, so this bounds the number of concurrent blocking waits, not
// the number of locks.
func WithMaxConns(n int) Option {
	return func(o *options) { o.MaxConns = n }
}

// WithTimeout bounds each statement run on a shared connection (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.Timeout = d }
}

// WithLocalHandoff bounds runs of local handoffs: at most max in a row,
// and none once a run has lasted span (default kit.DefaultHandoffMax, 8,
// and kit.DefaultHandoffSpan, 20 ms; max 0 turns them off). When an
// exclusive lock (Mutex, MutexKey, the write side of RWMutex) is released
// while an Acquire of the same Provider waits for it, the release keeps
// the lock on its connection and hands the grant to that waiter, with a
// token drawn on the holder's session (one round trip): no unlock, no
// server handover. Waiters in other processes are only granted the lock
// when it is unlocked, so the release that ends a run unlocks. Handoffs
// need the fence sequence (the default); with WithFenceTable the option has
// no effect. A negative max or, with max > 0, a span that is not positive
// is an error matching core.ErrInvalidArgument. See the package
// documentation, "Local handoff".
func WithLocalHandoff(max int, span time.Duration) Option {
	return func(o *options) { o.Handoff = kit.HandoffLimits{Max: max, Span: span} }
}

// MaxIdentity is the longest identity, in bytes, that WithIdentity accepts.
const MaxIdentity = 1024

// WithIdentity sets the identity recorded with each exclusive grant, which
// Holder reports (core.Inspector). It must be non-empty valid UTF-8 of at
// most MaxIdentity bytes. Default kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option {
	return func(o *options) { o.Identity = id }
}

// WithLogger sets where the Provider reports what happens to its locks
// (OBSERVABILITY.md lists the lines): at Warn, a connection that failed
// and took its locks with it, a listener for releases that had to
// reconnect, a lock lost, a release that failed; at Debug, each acquire
// and release. Default (and nil): discard, which costs nothing.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Log = l } }

// WithObserver adds obs to the observers of the Provider's locks: every
// acquire (its outcome and how long it took), release and loss (with its
// cause) is reported to it (core.Observer). Given more than once, every
// observer sees every event, in the order given. Default: none, which
// costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(o *options) { o.Observers = append(o.Observers, obs) }
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func validIdent(name string) error {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return kit.Invalid("pglock: table name %q has more than one dot", name)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return kit.Invalid("pglock: table name %q is not a plain SQL identifier", name)
		}
	}
	return nil
}

// quoteIdent quotes a validated, possibly schema-qualified, table name.
func quoteIdent(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}
