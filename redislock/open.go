package redislock

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/redis/go-redis/v9"
)

// Open returns a Provider on a client it makes from rawURL and owns: the
// Provider's Close closes it.
//
//	redis://[user:password@]host[:port][/db]             one server (port 6379 by default)
//	rediss://...                                         the same over TLS
//	redis+cluster://[user:password@]host:port[,host:port...]  a Redis Cluster, from seed nodes
//	rediss+cluster://...                                 the same over TLS
//
// Parameters: ttl (WithTTL), identity, prefix, renew_interval,
// drift_margin, handoff_max and handoff_span (WithLocalHandoff). Every
// other parameter is go-redis's (redis.ParseURL, redis.ParseClusterURL:
// dial_timeout, pool_size, client_name, protocol, ...), which rejects
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
	u.Duration("renew_interval", func(d time.Duration) { add(WithRenewInterval(d)) })
	u.Duration("drift_margin", func(d time.Duration) { add(WithDriftMargin(d)) })
	u.Handoff(func(l kit.HandoffLimits) { add(WithLocalHandoff(l.Max, l.Span)) })
	rest := u.Rest()
	if err := u.Err(); err != nil {
		return nil, err
	}
	newClient, err := clientFromURL(u, rest)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rdb := newClient()
	p, err := New(rdb, append(urlOpts, opts...)...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	p.owned = sync.OnceValue(rdb.Close)
	return p, nil
}

// clientFromURL checks the go-redis settings that u names (the schemes of
// Open), with the driver's parameters query, and returns the func that
// makes the client. It does no I/O.
func clientFromURL(u *kit.URL, query url.Values) (func() redis.UniversalClient, error) {
	scheme := "redis"
	if strings.HasPrefix(u.Scheme, "rediss") {
		scheme = "rediss"
	}
	switch u.Scheme {
	case "redis", "rediss":
		if len(u.Hosts) != 1 {
			return nil, u.Invalid("host", "%s:// takes one host (a Cluster is %s+cluster://, RedLock's servers redlock://)", u.Scheme, u.Scheme)
		}
		opt, err := redis.ParseURL(u.Format(scheme, u.Hosts, query))
		if err != nil {
			return nil, u.Invalid("go-redis options", "%v", err)
		}
		return func() redis.UniversalClient { return redis.NewClient(opt) }, nil
	case "redis+cluster", "rediss+cluster":
		switch {
		case len(u.Hosts) == 0:
			return nil, u.Invalid("host", "%s:// needs a seed node or more", u.Scheme)
		case u.Path != "" && u.Path != "/":
			return nil, u.Invalid("path", "a Redis Cluster has no database number")
		}
		q := url.Values{}
		for k, vs := range query {
			q[k] = vs
		}
		for _, h := range u.Hosts[1:] {
			q.Add("addr", h)
		}
		opt, err := redis.ParseClusterURL(u.Format(scheme, u.Hosts[:1], q))
		if err != nil {
			return nil, u.Invalid("go-redis options", "%v", err)
		}
		return func() redis.UniversalClient { return redis.NewClusterClient(opt) }, nil
	}
	return nil, u.Invalid("scheme", "redislock opens redis://, rediss://, redis+cluster:// and rediss+cluster://, not %s://", u.Scheme)
}
