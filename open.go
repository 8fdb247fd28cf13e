package distlock

import (
	"context"
	"maps"
	"slices"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/memlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/mysqllock"
	"github.com/distlock/distlock/natslock"
	"github.com/distlock/distlock/pglock"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/redlock"
)

// Provider is a backend opened from a URL: a core.Provider that owns its
// client, which Close closes. The backend's own type is behind it, so the
// optional interfaces (core.Membership, and core.Inspector on its Lockers)
// are there to assert when the backend has them.
type Provider interface {
	core.Provider
	// Close releases what the Provider holds as its backend documents,
	// then closes the client Open made. Release handles first.
	Close() error
}

// opener opens one backend's URL.
type opener func(ctx context.Context, rawURL string) (Provider, error)

// openers maps each scheme to its backend's Open.
var openers = map[string]opener{
	"file":           open(filelock.Open),
	"mem":            open(memlock.Open),
	"redis":          open(redislock.Open),
	"rediss":         open(redislock.Open),
	"redis+cluster":  open(redislock.Open),
	"rediss+cluster": open(redislock.Open),
	"redlock":        open(redlock.Open),
	"redlocks":       open(redlock.Open),
	"postgres":       open(pglock.Open),
	"postgresql":     open(pglock.Open),
	"nats":           open(natslock.Open),
	"nats+tls":       open(natslock.Open),
	"mysql":          open(mysqllock.Open),
	"etcd":           open(etcdlock.Open),
}

// open adapts a backend's Open, whose options stay at their URL values.
func open[P Provider, O any](f func(context.Context, string, ...O) (P, error)) opener {
	return func(ctx context.Context, rawURL string) (Provider, error) {
		p, err := f(ctx, rawURL)
		if err != nil {
			return nil, err // not p: a nil *P in an interface is not nil
		}
		return p, nil
	}
}

// Schemes lists the URL schemes Open knows, sorted.
func Schemes() []string { return slices.Sorted(maps.Keys(openers)) }

// Open returns the Provider rawURL names, by its scheme (see the package
// documentation for each scheme's form and the query parameters). The
// Provider owns the client it made; close it when done.
//
// A bad URL (an unknown scheme, a missing host, a parameter the backend
// does not take or whose value does not parse) is an error matching
// core.ErrInvalidArgument that names the part at fault, without the
// password. Open does no I/O except where the backend needs it to make its
// client (nats:// connects; file:// looks at the directory).
func Open(ctx context.Context, rawURL string) (Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o, ok := openers[u.Scheme]
	if !ok {
		return nil, u.Invalid("scheme", "unknown scheme %q: distlock opens %v", u.Scheme, Schemes())
	}
	return o(ctx, rawURL)
}
