package pglock

import (
	"context"

	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open returns a Provider on a pool it makes from rawURL and owns: the
// Provider's Close closes it.
//
//	postgres://[user[:password]@]host[:port][,host[:port]...]/database[?...]
//	postgresql://...
//
// Parameters: identity (WithIdentity), keepalive, max_conns, timeout,
// handoff_max and handoff_span (WithLocalHandoff), fence_table,
// fence_sequence, members_table. Every other parameter belongs to pgx's
// connection string (pgxpool.ParseConfig): sslmode, connect_timeout,
// pool_max_conns, and the run-time parameters it sends the server, such as
// application_name, which the server checks when the pool connects. opts
// apply after the URL's settings.
//
// A bad URL is an error matching core.ErrInvalidArgument that names the
// part at fault. Open does no I/O: the pool connects on first use.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, urlOpts, err := kit.ParseSessionURL[Option](rawURL)
	if err != nil {
		return nil, err
	}
	var noTTL error // pgx would send ttl to the server as a run-time parameter
	u.Text("ttl", func(string) {
		noTTL = u.Invalid("parameter ttl", "pglock has no TTL: a lock lives as long as its connection (see keepalive)")
	})
	rest := u.Rest()
	switch {
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return nil, u.Invalid("scheme", "pglock opens postgres:// and postgresql://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case noTTL != nil:
		return nil, noTTL
	case len(u.Hosts) == 0:
		return nil, u.Invalid("host", "postgres:// needs a host")
	}
	cfg, err := pgxpool.ParseConfig(u.Format(u.Scheme, u.Hosts, rest))
	if err != nil {
		return nil, u.Invalid("pgx connection string", "%v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p, err := New(pool, append(urlOpts, opts...)...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	p.owned = true
	return p, nil
}
