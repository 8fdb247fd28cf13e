package redlock

import (
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock"
)

// Defaults, applied by New when the matching option is not given.
const (
	// DefaultTTL is how long each server keeps a grant that is not
	// extended: the time a crashed holder blocks others.
	DefaultTTL = 30 * time.Second
	// DefaultMinValidity is the validity a returned handle has left at
	// least: the acquire budget is TTL − minimum validity.
	DefaultMinValidity = 27 * time.Second
	// DefaultPrefix starts every key and the wake-up channel.
	DefaultPrefix = "distlock:"
)

// Option configures a Provider.
type Option func(*config)

type config struct {
	ttl, minValidity, interval, margin time.Duration
	guard                              time.Duration
	prefix                             string
	identity                           string
	backoff                            kit.Backoff
	log                                *slog.Logger
	intervalSet, marginSet, minSet     bool
	guardSet                           bool

	observers []core.Observer
}

// WithTTL sets how long each server keeps a grant without an extension.
// Default DefaultTTL; must be in (0, redislock.MaxTTL].
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithMinValidity sets the validity a returned handle has left at least; an
// acquire that has not reached a majority within TTL − minimum validity
// fails. Default DefaultMinValidity, or 90 % of a TTL set with WithTTL;
// must be in (0, TTL).
func WithMinValidity(d time.Duration) Option {
	return func(c *config) { c.minValidity, c.minSet = d, true }
}

// WithRenewInterval sets the extension cadence. Default TTL/3; must be
// shorter than TTL − drift margin.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) { c.interval, c.intervalSet = d, true }
}

// WithDriftMargin sets the allowance for clock drift between this process
// and the servers: a handle is trusted until its last successful extension
// (or acquire) started + TTL − margin. Default TTL/100 + 2 ms, RedLock's
// customary clock-drift factor; must be in [0, TTL).
func WithDriftMargin(d time.Duration) Option {
	return func(c *config) { c.margin, c.marginSet = d, true }
}

// WithRestartGuard sets how long a server that lost its data set (or is
// new) does not count toward a majority of acquires: RedLock's "delayed
// restart", enforced by the client. Each server keeps a boot marker
// (redisop.Client.BootKey) written by the first acquire that finds it
// missing; until the guard has passed since then, the server still grants
// (and blocks others) but its grant is not counted, since a grant it lost
// may still be counted by its holder. Default TTL, which is sound when
// every Provider on the servers uses a TTL no longer than it; 0 turns the
// guard off, which is sound only when no server can lose an acknowledged
// write (AOF with appendfsync always). Must be 0 or at least TTL.
func WithRestartGuard(d time.Duration) Option {
	return func(c *config) { c.guard, c.guardSet = d, true }
}

// WithPrefix sets the prefix of every key and of the wake-up channel.
// Default DefaultPrefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithIdentity sets the identity recorded with every grant and reported as
// core.Holder.ID by Holder. Default kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option { return func(c *config) { c.identity = id } }

// WithBackoff sets the fallback retry cadence of a waiting Acquire when no
// release is announced. Default kit.DefaultBackoff.
func WithBackoff(b kit.Backoff) Option { return func(c *config) { c.backoff = b } }

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

func newConfig(opts []Option) (config, error) {
	c := config{ttl: DefaultTTL, prefix: DefaultPrefix, backoff: kit.DefaultBackoff, identity: kit.DefaultIdentity()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.ttl <= 0 || c.ttl > redislock.MaxTTL:
		return c, kit.Invalid("redlock: TTL %v must be in (0, %v]", c.ttl, redislock.MaxTTL)
	case c.ttl < 10*time.Millisecond:
		return c, kit.Invalid("redlock: TTL %v is too short to extend (under 10ms)", c.ttl)
	case c.identity == "":
		return c, kit.Invalid("redlock: empty identity")
	}
	if !c.minSet {
		c.minValidity = c.ttl * 9 / 10
	}
	if !c.marginSet {
		c.margin = c.ttl/100 + 2*time.Millisecond
	}
	if !c.intervalSet {
		c.interval = c.ttl / 3
	}
	if !c.guardSet {
		c.guard = c.ttl
	}
	switch {
	case c.minValidity <= 0 || c.minValidity >= c.ttl:
		return c, kit.Invalid("redlock: minimum validity %v must be in (0, TTL %v)", c.minValidity, c.ttl)
	case c.margin < 0 || c.margin >= c.ttl:
		return c, kit.Invalid("redlock: drift margin %v must be in [0, TTL %v)", c.margin, c.ttl)
	case c.interval <= 0 || c.interval >= c.ttl-c.margin:
		return c, kit.Invalid("redlock: renew interval %v must be in (0, TTL − drift margin = %v)", c.interval, c.ttl-c.margin)
	case c.guard != 0 && c.guard < c.ttl:
		return c, kit.Invalid("redlock: restart guard %v must be 0 or at least TTL %v", c.guard, c.ttl)
	case c.backoff.Min < 0 || c.backoff.Max < c.backoff.Min:
		return c, kit.Invalid("redlock: backoff %v..%v is not a range", c.backoff.Min, c.backoff.Max)
	}
	return c, nil
}

// budget is how long an acquire may take to reach a majority.
func (c config) budget() time.Duration { return c.ttl - c.minValidity }
