package mysqllock

import (
	"log/slog"
	"regexp"
	"time"

	"github.com/distlock/distlock/core/kit"
)

// Defaults, in one place.
const (
	// DefaultFenceTable holds one fencing counter row per lock.
	DefaultFenceTable = "distlock_fence"
	// DefaultMembersTable holds the Membership registrations.
	DefaultMembersTable = "distlock_members"
	// DefaultKeepalive is how often a connection that holds locks is pinged;
	// a killed session or a dead server is reported within about this, a
	// cut network within about twice this.
	DefaultKeepalive = 2 * time.Second
	// DefaultMaxConns bounds the connections a Provider pins for holding
	// and waiting.
	DefaultMaxConns = 16
	// DefaultTimeout bounds one statement on a connection that holds locks
	// (a try, a release), so a server that stopped answering fails the call
	// instead of hanging it.
	DefaultTimeout = 10 * time.Second
)

type options struct {
	fenceTable   string
	membersTable string
	keepalive    time.Duration
	maxConns     int
	timeout      time.Duration
	identity     string
	handoff      kit.HandoffLimits
	log          *slog.Logger
}

// Option configures a Provider.
type Option func(*options)

// WithFenceTable names the table of fencing counters (default
// DefaultFenceTable): one row per lock, bumped by the statement that takes
// the lock, which also records the holder's identity and connection id
// (what Holder reports). The name may be schema-qualified ("locks.fence");
// each part must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most
// 64 bytes). The Provider creates it with CREATE TABLE IF NOT EXISTS on
// first use, so its user needs the right to create it, or someone creates
// it beforehand:
//
//	CREATE TABLE distlock_fence (name VARBINARY(64) PRIMARY KEY,
//	  token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB
func WithFenceTable(name string) Option {
	return func(o *options) { o.fenceTable = name }
}

// WithMembersTable names the table that Membership uses (default
// DefaultMembersTable), with the same rules as WithFenceTable:
//
//	CREATE TABLE distlock_members (grp VARBINARY(255), id VARBINARY(255),
//	  expires_at DATETIME(6) NOT NULL, PRIMARY KEY (grp, id)) ENGINE=InnoDB
func WithMembersTable(name string) Option {
	return func(o *options) { o.membersTable = name }
}

// WithKeepalive sets how often each connection that holds locks is pinged
// (default DefaultKeepalive). A failed ping, or any failed statement on the
// connection, cancels the context of every handle held on it with
// core.ErrLockLost.
func WithKeepalive(d time.Duration) Option {
	return func(o *options) { o.keepalive = d }
}

// WithMaxConns bounds the connections the Provider pins from its *sql.DB
// for holding and waiting (default DefaultMaxConns, at least 2). Held locks
// share connections, so this bounds the number of concurrent blocking
// waits, not the number of locks. A DB whose SetMaxOpenConns leaves no room
// beside them for the Provider's other statements (creating tables, KILL
// QUERY, Holder, Membership) is refused by New.
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// WithTimeout bounds each statement run on a shared connection (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
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
	return func(o *options) { o.handoff = kit.HandoffLimits{Max: max, Span: span} }
}

// MaxIdentity is the longest identity, in bytes, that WithIdentity accepts
// (the fence table's holder column).
const MaxIdentity = 1024

// WithIdentity sets the identity recorded with each grant, which Holder
// reports (core.Inspector). It must be non-empty valid UTF-8 of at most
// MaxIdentity bytes. Default kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option {
	return func(o *options) { o.identity = id }
}

// WithLogger sets where the Provider reports what happens without a call of
// the caller's: a connection that failed and took its locks with it, a
// KILL QUERY that failed. Default (and nil): discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

func defaults() options {
	return options{
		fenceTable:   DefaultFenceTable,
		membersTable: DefaultMembersTable,
		keepalive:    DefaultKeepalive,
		maxConns:     DefaultMaxConns,
		timeout:      DefaultTimeout,
		identity:     kit.DefaultIdentity(),
		handoff:      kit.DefaultHandoffLimits(),
	}
}

// validate returns the first broken invariant of o, matching
// core.ErrInvalidArgument.
func (o options) validate() error {
	for _, name := range []string{o.fenceTable, o.membersTable} {
		if err := validIdent(name); err != nil {
			return err
		}
	}
	switch {
	case o.keepalive <= 0:
		return kit.Invalid("mysqllock: keepalive %v must be positive", o.keepalive)
	case o.maxConns < 2:
		return kit.Invalid("mysqllock: max conns %d must be at least 2", o.maxConns)
	case o.timeout <= 0:
		return kit.Invalid("mysqllock: timeout %v must be positive", o.timeout)
	case kit.ValidateName(o.identity) != nil || len(o.identity) > MaxIdentity:
		return kit.Invalid("mysqllock: identity must be non-empty UTF-8 of at most %d bytes", MaxIdentity)
	}
	return o.handoff.Validate("mysqllock")
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?$`)

func validIdent(name string) error {
	if !identRE.MatchString(name) {
		return kit.Invalid("mysqllock: table name %q is not a plain SQL identifier, optionally schema-qualified", name)
	}
	return nil
}
