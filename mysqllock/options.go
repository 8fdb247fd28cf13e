package mysqllock

import (
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Defaults, in one place.
const (
	// DefaultFenceSequence is the MariaDB sequence fencing tokens are drawn
	// from unless WithFenceTable is given.
	DefaultFenceSequence = "distlock_fence_seq"
	// DefaultFenceTable is the table of per-lock fencing counters that
	// WithFenceTable(DefaultFenceTable) selects.
	DefaultFenceTable = "distlock_fence"
	// DefaultMembersTable holds the Membership registrations.
	DefaultMembersTable = "distlock_members"
	// DefaultKeepalive is how often a connection that holds locks is pinged;
	// a killed session or a dead server is reported within about this, a
	// cut network within about twice this.
	DefaultKeepalive = kit.DefaultSessionKeepalive
	// DefaultMaxConns bounds the connections a Provider pins for holding
	// and waiting.
	DefaultMaxConns = kit.DefaultSessionMaxConns
	// DefaultTimeout bounds one statement on a connection that holds locks
	// (a try, a release), so a server that stopped answering fails the call
	// instead of hanging it.
	DefaultTimeout = kit.DefaultSessionTimeout
)

// options are the shared options of a backend on kit.Sessions.
type options = kit.SessionConfig

// Option configures a Provider.
type Option func(*options)

// WithFenceTable draws fencing tokens from a table of counters, one row per
// lock, named name (DefaultFenceTable is the usual choice), instead of the
// default sequence: the way on MySQL, which has no sequences. The statement
// that takes a lock bumps its row and records the holder's identity and
// connection id in it, which is what lets a Mutex report its holder
// (core.Inspector: election's Leader, polllease's strict ownership check
// and snapshot). The price is a row write and an InnoDB commit in every
// grant's statement (see the README for measurements). Local handoffs draw
// their tokens from the row too.
//
// The name may be schema-qualified ("locks.fence"); each part must be a
// plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes). The
// Provider creates the table with CREATE TABLE IF NOT EXISTS on first use,
// so its user needs the right to create it, or someone creates it
// beforehand:
//
//	CREATE TABLE distlock_fence (name VARBINARY(64) PRIMARY KEY,
//	  token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB
func WithFenceTable(name string) Option {
	return func(o *options) { o.FenceTable, o.FenceSeq = name, false }
}

// WithFenceSequence names the MariaDB sequence (10.3 and later) fencing
// tokens are drawn from (the default source, DefaultFenceSequence), with the
// same rules as WithFenceTable, the last part at most 59 bytes. The
// Provider creates it on first use with CREATE SEQUENCE IF NOT EXISTS
// ... INCREMENT BY 1 CACHE 1000, and beside it a one-row table named after
// it plus "_mark"; a sequence made beforehand needs INCREMENT 1 and a
// CACHE.
//
// Tokens from one sequence increase across all locks rather than per lock,
// which still makes every lock's tokens strictly increasing. The grant
// statement draws the token only when GET_LOCK grants, in the same round
// trip, and writes no row. NEXTVAL serves blocks of CACHE values from
// memory; once per block a Provider draws from, it commits the mark row
// before it returns the token, which makes the sequence's record of the
// block durable (see the package documentation, "Fencing"). Locks of a
// Provider using a sequence do not implement core.Inspector: no row
// records the holder (see WithFenceTable). Every Provider sharing locks
// must use the same fence source.
func WithFenceSequence(name string) Option {
	return func(o *options) { o.FenceTable, o.FenceSeq = name, true }
}

// WithMembersTable names the table that Membership uses (default
// DefaultMembersTable), with the same rules as WithFenceTable, created on
// first use:
//
//	CREATE TABLE distlock_members (grp VARBINARY(255), id VARBINARY(255),
//	  expires_at DATETIME(6) NOT NULL, value MEDIUMBLOB, PRIMARY KEY (grp, id)) ENGINE=InnoDB
//
// A table without the value column (made by an earlier version) gets it
// with ALTER TABLE ... ADD COLUMN on a Provider's first membership call.
// Where the user lacks the ALTER privilege, the Provider works without
// values: Announce fails with an error matching core.ErrUnsupported, the
// other membership calls work, and one warning names the statement to run
// (see the package documentation, "Membership").
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

// WithMaxConns bounds the connections the Provider pins from its *sql.DB
// for holding and waiting (default DefaultMaxConns, at least 2). Held locks
// share connections, so this bounds the number of concurrent blocking
// waits, not the number of locks. A DB whose SetMaxOpenConns leaves no room
// beside them for the Provider's other statements (creating tables, KILL
// QUERY, Holder, Membership) is refused by New.
func WithMaxConns(n int) Option {
	return func(o *options) { o.MaxConns = n }
}

// WithTimeout bounds each statement run on a shared connection (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.Timeout = d }
}

// WithLocalHandoff bounds runs of local handoffs of a Mutex: at most max in
// a row, and none once a run has lasted span (default kit.DefaultHandoffMax,
// 8, and kit.DefaultHandoffSpan, 20 ms; max 0 turns them off). When a Mutex
// is released while an Acquire of the same Provider waits for it, the
// release keeps the lock on its connection and hands the grant to that
// waiter with a token drawn on the holder's session (one round trip). A
// negative max or, with max > 0, a span that is not positive is an error
// matching core.ErrInvalidArgument. See the package documentation, "Local
// handoff".
func WithLocalHandoff(max int, span time.Duration) Option {
	return func(o *options) { o.Handoff = kit.HandoffLimits{Max: max, Span: span} }
}

// MaxIdentity is the longest identity, in bytes, that WithIdentity accepts
// (the fence table's holder column).
const MaxIdentity = 1024

// WithIdentity sets the identity recorded with each grant, which Holder
// reports (core.Inspector). It must be non-empty valid UTF-8 of at most
// MaxIdentity bytes. Default kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option {
	return func(o *options) { o.Identity = id }
}

// WithLogger sets where the Provider reports what happens without a call of
// the caller's: a connection that failed and took its locks with it, a
// KILL QUERY that failed, a members table without the value column that
// the user may not add. Default (and nil): discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Log = l } }

// WithObserver adds obs to the observers of the Provider's locks: every
// acquire (its outcome and how long it took), release and loss (with its
// cause) is reported to it (core.Observer). Given more than once, every
// observer sees every event, in the order given. Default: none, which
// costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(o *options) { o.Observers = append(o.Observers, obs) }
}

func defaults() options {
	return kit.DefaultSessionConfig(DefaultFenceSequence, DefaultMembersTable)
}

// checkSequence checks that the mark table's name, the sequence's plus
// markSuffix, fits MySQL's 64 bytes.
func checkSequence(o *options) error {
	if o.FenceSeq && len(o.FenceTable[strings.LastIndex(o.FenceTable, ".")+1:]) > 64-len(markSuffix) {
		return kit.Invalid("mysqllock: sequence name %q is longer than %d bytes (its mark table adds %q)",
			o.FenceTable, 64-len(markSuffix), markSuffix)
	}
	return nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?$`)

func validIdent(name string) error {
	if !identRE.MatchString(name) {
		return kit.Invalid("mysqllock: table name %q is not a plain SQL identifier, optionally schema-qualified", name)
	}
	return nil
}
