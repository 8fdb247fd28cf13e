package etcdlock

import (
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Defaults, in one place; each is documented beside its option.
const (
	DefaultPrefix  = "distlock/"
	DefaultTTL     = 30 * time.Second
	DefaultTimeout = 5 * time.Second
	// MaxTTL is the longest lease etcd grants (its MaxLeaseTTL).
	MaxTTL = 9_000_000_000 * time.Second
	// MaxIdentity is the longest identity, in bytes, that WithIdentity
	// accepts.
	MaxIdentity = 1024
)

// Option configures New.
type Option func(*options)

type options struct {
	prefix    string
	ttl       time.Duration
	identity  string
	timeout   time.Duration
	log       *slog.Logger
	observers []core.Observer
}

// WithPrefix sets the key prefix under which the Provider keeps its locks
// and members (default DefaultPrefix, "distlock/"). Every process that
// shares locks must use the same prefix. It must be non-empty valid UTF-8.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithTTL sets the TTL of the Provider's etcd lease, which every key it
// writes is attached to: a holder that dies frees its locks that long after
// its last keep-alive. The lease is kept alive every TTL/3 while the
// Provider has keys; a handle is trusted until the start of the last
// successful keep-alive + TTL − TTL/10. etcd counts lease TTLs in whole
// seconds, so the TTL must be a whole number of seconds, from 1 s to
// MaxTTL; a server may raise a shorter lease to its minimum (1.5 election
// timeouts, 2 s with etcd's defaults), which delays only the freeing of a
// dead holder's locks. Default DefaultTTL, 30 s.
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithIdentity sets the holder identity stored as the value of every key
// the Provider writes, which core.Inspector (a Mutex's or an RWMutex's
// Holder) and Provider.Holder report. It must be non-empty valid UTF-8 of
// at most MaxIdentity bytes. Default kit.DefaultIdentity(), "hostname-pid".
func WithIdentity(id string) Option { return func(o *options) { o.identity = id } }

// WithTimeout bounds each request the Provider makes for a call of the
// caller's (an acquire, a release, a lookup), so a server that does not
// answer gives an error instead of a wait as long as the caller's context.
// Default DefaultTimeout, 5 s.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets where the Provider reports what happens without a call of
// the caller's: a lease that could not be revoked, a watch the server
// ended. Default (and nil): discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithObserver adds obs to the observers of the Provider's locks: every
// acquire (its outcome and how long it took), release and loss (with its
// cause) is reported to it (core.Observer). Given more than once, every
// observer sees every event, in the order given. Default: none, which
// costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(o *options) { o.observers = append(o.observers, obs) }
}

func defaults() options {
	return options{
		prefix:   DefaultPrefix,
		ttl:      DefaultTTL,
		identity: kit.DefaultIdentity(),
		timeout:  DefaultTimeout,
	}
}

// validate returns the first broken invariant of o, matching
// core.ErrInvalidArgument.
func (o options) validate() error {
	switch {
	case kit.ValidateName(o.prefix) != nil:
		return kit.Invalid("etcdlock: prefix must be non-empty valid UTF-8")
	case o.ttl < time.Second || o.ttl > MaxTTL:
		return kit.Invalid("etcdlock: TTL %v not in [1s, %v]", o.ttl, MaxTTL)
	case o.ttl%time.Second != 0:
		return kit.Invalid("etcdlock: TTL %v is not a whole number of seconds (etcd leases count seconds)", o.ttl)
	case kit.ValidateName(o.identity) != nil || len(o.identity) > MaxIdentity:
		return kit.Invalid("etcdlock: identity must be non-empty valid UTF-8 of at most %d bytes", MaxIdentity)
	case o.timeout <= 0:
		return kit.Invalid("etcdlock: timeout %v is not positive", o.timeout)
	}
	return nil
}
