package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/core/kit"
)

// Open returns a Provider on an etcd client it makes from rawURL and owns:
// the Provider's Close closes it.
//
//	etcd://[user:password@]host[:port][,host[:port]...]
//
// Parameters: ttl (WithTTL), prefix (WithPrefix), identity (WithIdentity),
// timeout (WithTimeout), dial_timeout (the client's, default 5 s),
// keepalive (default 10 s, the least gRPC allows: it raises a shorter one
// to 10 s): how long a connection to a member may stay silent before the
// client pings it; a member that does not answer the ping within 2 s more
// (frozen, or cut off by a partition) is dropped, so that the client's
// requests and watches move to the other members. It must also be at
// least the servers' --grpc-keepalive-min-time (5 s by default), or they
// close the connection. An unknown parameter is an error. opts apply after
// the URL's settings.
//
// A bad URL is an error matching core.ErrInvalidArgument that names the
// part at fault. The client dials in the background; the first call on a
// lock waits for it, within that call's context.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var urlOpts []Option
	add := func(o Option) { urlOpts = append(urlOpts, o) }
	u.Duration("ttl", func(d time.Duration) { add(WithTTL(d)) })
	u.Text("prefix", func(p string) { add(WithPrefix(p)) })
	u.Text("identity", func(id string) { add(WithIdentity(id)) })
	u.Duration("timeout", func(d time.Duration) { add(WithTimeout(d)) })
	dial, keepalive := 5*time.Second, 10*time.Second
	u.Duration("dial_timeout", func(d time.Duration) { dial = d })
	u.Duration("keepalive", func(d time.Duration) { keepalive = d })
	switch {
	case u.Scheme != "etcd":
		return nil, u.Invalid("scheme", "etcdlock opens etcd://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case len(u.Hosts) == 0:
		return nil, u.Invalid("host", "etcd:// needs an endpoint, as in etcd://localhost:2379")
	case u.Path != "" && u.Path != "/":
		return nil, u.Invalid("path", "etcd:// takes no path: name the key prefix with ?prefix=")
	case dial <= 0:
		return nil, u.Invalid("parameter dial_timeout", "%v must be positive", dial)
	case keepalive <= 0:
		return nil, u.Invalid("parameter keepalive", "%v must be positive", keepalive)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	cfg := clientv3.Config{Endpoints: u.Hosts, DialTimeout: dial, Logger: zap.NewNop(), Context: context.WithoutCancel(ctx),
		DialKeepAliveTime: keepalive, DialKeepAliveTimeout: 2 * time.Second}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, u.Invalid("client", "%v", err)
	}
	p, err := New(cli, append(urlOpts, opts...)...)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	p.owned = cli
	return p, nil
}
