package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

// Open returns a Provider on clients it makes from rawURL, one per server,
// and owns: the Provider's Close closes them.
//
//	redlock://[user:password@]host:port,host:port,host:port[/db]
//	redlocks://...    the same over TLS
//
// Every server gets the same user, password, database and go-redis
// settings. Parameters: ttl (WithTTL), identity, prefix, min_validity,
// renew_interval, drift_margin, restart_guard. Every other parameter is
// go-redis's (redis.ParseURL: dial_timeout, pool_size, ...), which rejects
// those it does not know. opts apply after the URL's settings.
//
// A bad URL is an error matching core.ErrInvalidArgument that names the
// part at fault. Open does no I/O: the first acquire connects.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var urlOpts []Option
	add := func(o Option) { urlOpts = append(urlOpts, o) }
	u.Duration("ttl", func(d time.Duration) { add(WithTTL(d)) })
	u.Text("identity", func(id string) { add(WithIdentity(id)) })
	u.Text("prefix", func(p string) { add(WithPrefix(p)) })
	u.Duration("min_validity", func(d time.Duration) { add(WithMinValidity(d)) })
	u.Duration("renew_interval", func(d time.Duration) { add(WithRenewInterval(d)) })
	u.Duration("drift_margin", func(d time.Duration) { add(WithDriftMargin(d)) })
	u.Duration("restart_guard", func(d time.Duration) { add(WithRestartGuard(d)) })
	rest := u.Rest()
	scheme := map[string]string{"redlock": "redis", "redlocks": "rediss"}[u.Scheme]
	switch {
	case scheme == "":
		return nil, u.Invalid("scheme", "redlock opens redlock:// and redlocks://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case len(u.Hosts) == 0:
		return nil, u.Invalid("host", "redlock:// lists its servers, as in redlock://h1:6379,h2:6379,h3:6379")
	}
	settings := make([]*redis.Options, len(u.Hosts))
	for i, h := range u.Hosts {
		if settings[i], err = redis.ParseURL(u.Format(scheme, []string{h}, rest)); err != nil {
			return nil, u.Invalid("go-redis options", "%v", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	clients := make([]redis.UniversalClient, len(settings))
	for i, opt := range settings {
		clients[i] = redis.NewClient(opt)
	}
	closeAll := func() error {
		var errs []error
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	p, err := New(clients, append(urlOpts, opts...)...)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	p.owned = sync.OnceValue(closeAll)
	return p, nil
}
