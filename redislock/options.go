package redislock

import (
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Defaults, applied by New when the matching option is not given.
const (
	// DefaultTTL is how long Redis keeps a grant that is no longer renewed:
	// the time a crashed holder blocks others.
	DefaultTTL = 30 * time.Second
	// DefaultPrefix starts every key and the wake-up channel.
	DefaultPrefix = "distlock:"
	// MaxTTL is the largest TTL New accepts; anything longer is a mistake
	// (a unit slip), not a lease.
	MaxTTL = 24 * time.Hour
)

// Option configures a Provider.
type Option func(*config)

type config struct {
	ttl      time.Duration
	interval time.Duration // 0: TTL/3
	margin   time.Duration // -1: TTL/10
	prefix   string
	log      *slog.Logger
	backoff  kit.Backoff
	identity string
	handoff  kit.HandoffLimits // runs of local handoffs
	ack      struct {
		set     bool // WithReplicaAck was given: New checks n and timeout
		n       int
		timeout time.Duration
	}

	intervalSet, marginSet bool

	observers []core.Observer
}

// WithTTL sets the lease of every grant: how long Redis keeps it without a
// renewal, hence how long a crashed holder blocks others. Default
// DefaultTTL; must be in (0, MaxTTL].
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithRenewInterval sets the renewal (extension) cadence of held grants.
// Default TTL/3; must be positive and shorter than TTL − drift margin.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) { c.interval, c.intervalSet = d, true }
}

// WithDriftMargin sets the safety margin subtracted from the TTL when
// deciding how long a grant can be trusted without a successful renewal (the
// minimum validity left when the handle's context ends): the trust window
// is last renewal start + TTL − margin. Default TTL/10; must be in [0, TTL).
func WithDriftMargin(d time.Duration) Option {
	return func(c *config) { c.margin, c.marginSet = d, true }
}

// WithPrefix sets the prefix of every key and of the wake-up channel.
// Providers see each other's locks only when they use the same prefix.
// Default DefaultPrefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithLogger sets where the Provider reports what happens to its locks
// (OBSERVABILITY.md lists the lines): at Warn, a dropped pub/sub
// connection, a lock lost, a renewal or a release that failed; at Debug,
// each acquire and release. Default: discard, which costs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithObserver adds obs to the observers of the Provider's locks: every
// acquire (its outcome and how long it took), release, loss (with its
// cause) and lease renewal is reported to it (core.Observer). Given more
// than once, every observer sees every event, in the order given. Default:
// none, which costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(c *config) { c.observers = append(c.observers, obs) }
}

// WithBackoff sets the fallback retry cadence of a waiting Acquire, used
// when no release signal arrives. Each delay is also capped by the time the
// current holder's grant has left. Default kit.DefaultBackoff.
func WithBackoff(b kit.Backoff) Option { return func(c *config) { c.backoff = b } }

// WithIdentity sets the identity recorded with every grant and reported as
// the holder by Holder (core.Inspector). Default kit.DefaultIdentity().
// It must not be empty.
func WithIdentity(id string) Option { return func(c *config) { c.identity = id } }

// WithLocalHandoff bounds runs of local handoffs of a mutex: at most max in
// a row, and none once a run has lasted span (default kit.DefaultHandoffMax,
// 8, and kit.DefaultHandoffSpan, 20 ms; max 0 turns them off). A release
// that finds an Acquire of the same Provider waiting hands the key straight
// to it with one script that draws its fencing token and lands only while
// the key is still ours (handoff.go tells how), where a release and an
// acquire cost two and a pub/sub message. Waiters in other processes are
// granted the key only by the release script, so the release that ends a
// run runs it, and the first waiter queued on the server gets the key. New
// returns an error matching core.ErrInvalidArgument for a negative max or,
// with max > 0, a span that is not positive.
func WithLocalHandoff(max int, span time.Duration) Option {
	return func(c *config) { c.handoff = kit.HandoffLimits{Max: max, Span: span} }
}

// WithReplicaAck confirms every grant with replicas: each grant (an
// acquire, a local handoff's token, a handoff by the server's release
// taken by a waiter of this Provider) is followed on its own connection, in
// the same pipeline, by WAIT n timeout, and counts only once n replicas
// acknowledged it, so that a replica promoted by a failover (Sentinel) has
// it. A grant not acknowledged in time is given back and reported as an
// error matching core.ErrNotAcquired (a waiting Acquire goes on waiting).
// Fencing tokens are then also kept above the name's durable counter,
// raised by each grant and acknowledged with it, so they increase across a
// failover whatever the promoted replica's clock says; the counter is one
// key per name that never expires, and every Provider of a name must use
// the option for it to be raised. It costs no extra round trip, only the replicas' acknowledgment time,
// except for a handoff by the server, which is confirmed with one extra
// round trip. Default off. New fails with an error matching
// core.ErrInvalidArgument when n < 1, timeout is not positive or not
// shorter than the client's read timeout, or the client is not bound to
// one master (a Cluster client).
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) { c.ack.set, c.ack.n, c.ack.timeout = true, n, timeout }
}

func newConfig(opts []Option) (config, error) {
	c := config{
		ttl:      DefaultTTL,
		prefix:   DefaultPrefix,
		backoff:  kit.DefaultBackoff,
		identity: kit.DefaultIdentity(),

		handoff: kit.DefaultHandoffLimits(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.ttl <= 0:
		return c, kit.Invalid("redislock: TTL %v must be positive", c.ttl)
	case c.ttl > MaxTTL:
		return c, kit.Invalid("redislock: TTL %v is absurd (over %v)", c.ttl, MaxTTL)
	case c.ttl < 10*time.Millisecond:
		return c, kit.Invalid("redislock: TTL %v is too short to renew (under 10ms)", c.ttl)
	}
	if !c.marginSet {
		c.margin = c.ttl / 10
	}
	if !c.intervalSet {
		c.interval = c.ttl / 3
	}
	switch {
	case c.margin < 0 || c.margin >= c.ttl:
		return c, kit.Invalid("redislock: drift margin %v must be in [0, TTL %v)", c.margin, c.ttl)
	case c.interval <= 0:
		return c, kit.Invalid("redislock: renew interval %v must be positive", c.interval)
	case c.interval >= c.ttl:
		return c, kit.Invalid("redislock: renew interval %v must be shorter than TTL %v", c.interval, c.ttl)
	case c.interval >= c.ttl-c.margin:
		return c, kit.Invalid("redislock: renew interval %v must be shorter than TTL − drift margin (%v)", c.interval, c.ttl-c.margin)
	case c.backoff.Min < 0 || c.backoff.Max < c.backoff.Min:
		return c, kit.Invalid("redislock: backoff %v..%v is not a range", c.backoff.Min, c.backoff.Max)
	case c.identity == "":
		return c, kit.Invalid("redislock: empty identity")
	}
	return c, c.handoff.Validate("redislock")
}

// markerTTL is how long a waiting writer's marker lives: longer than the
// longest pause between two attempts of the waiting writer, which refreshes
// it on each.
func (c config) markerTTL() time.Duration {
	return max(time.Second, 3*c.backoff.Max)
}
