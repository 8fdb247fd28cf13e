package natslock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core/kit"
)

// Open returns a Provider on a NATS connection it makes from rawURL and
// owns: the Provider's Close closes it.
//
//	nats://[user:password@ | token@]host[:port][,host[:port]...]
//	nats+tls://...    the same, requiring TLS
//
// Parameters: bucket (WithBucket), members_bucket, member_max_ttl, ttl,
// renew_interval, identity, timeout, handoff_max and handoff_span (WithLocalHandoff);
// js_domain or js_api_prefix, the JetStream domain or API prefix
// (jetstream.NewWithDomain, jetstream.NewWithAPIPrefix); connect_timeout,
// the dial timeout (nats.Timeout, default 2 s). opts apply after the URL's
// settings.
//
// A bad URL is an error matching core.ErrInvalidArgument that names the
// part at fault. Open connects (bounded by connect_timeout and ctx's
// deadline) and then makes New's requests: it fails when the server cannot
// be reached.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var urlOpts []Option
	add := func(o Option) { urlOpts = append(urlOpts, o) }
	var buckets []string // checked before dialing
	u.Text("bucket", func(b string) { buckets = append(buckets, b); add(WithBucket(b)) })
	u.Text("members_bucket", func(b string) { buckets = append(buckets, b); add(WithMembersBucket(b)) })
	u.Duration("member_max_ttl", func(d time.Duration) { add(WithMemberMaxTTL(d)) })
	u.Duration("ttl", func(d time.Duration) { add(WithTTL(d)) })
	u.Duration("renew_interval", func(d time.Duration) { add(WithRenewInterval(d)) })
	u.Text("identity", func(id string) { add(WithIdentity(id)) })
	u.Duration("timeout", func(d time.Duration) { add(WithTimeout(d)) })
	u.Handoff(func(l kit.HandoffLimits) { add(WithLocalHandoff(l.Max, l.Span)) })
	var domain, apiPrefix string
	connectTimeout := nats.GetDefaultOptions().Timeout
	u.Text("js_domain", func(d string) { domain = d })
	u.Text("js_api_prefix", func(p string) { apiPrefix = p })
	u.Duration("connect_timeout", func(d time.Duration) { connectTimeout = d })
	scheme := map[string]string{"nats": "nats", "nats+tls": "tls"}[u.Scheme]
	switch {
	case scheme == "":
		return nil, u.Invalid("scheme", "natslock opens nats:// and nats+tls://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case len(u.Hosts) == 0:
		return nil, u.Invalid("host", "nats:// needs a server, as in nats://localhost:4222")
	case u.Path != "" && u.Path != "/":
		return nil, u.Invalid("path", "nats:// takes no path: name the bucket with ?bucket=")
	case domain != "" && apiPrefix != "":
		return nil, u.Invalid("parameter js_domain", "give js_domain or js_api_prefix, not both")
	case slices.ContainsFunc(buckets, func(b string) bool { return !validBucket(b) }):
		return nil, u.Invalid("parameter bucket", "bucket and members_bucket names are letters, digits, - and _")
	case connectTimeout <= 0:
		return nil, u.Invalid("parameter connect_timeout", "%v must be positive", connectTimeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	if d, ok := ctx.Deadline(); ok {
		connectTimeout = min(connectTimeout, time.Until(d))
	}
	servers := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		servers[i] = strings.TrimSuffix(u.Format(scheme, []string{h}, nil), "/")
	}
	nc, err := nats.Connect(strings.Join(servers, ","), nats.Timeout(connectTimeout))
	if err != nil {
		return nil, fmt.Errorf("natslock: connect %s: %w", u, err)
	}
	p, err := newOnConn(nc, domain, apiPrefix, append(urlOpts, opts...))
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.owned = sync.OnceFunc(nc.Close)
	return p, nil
}

// newOnConn makes the JetStream context (in domain, or under apiPrefix)
// and the Provider on nc.
func newOnConn(nc *nats.Conn, domain, apiPrefix string, opts []Option) (*Provider, error) {
	var js jetstream.JetStream
	var err error
	switch {
	case domain != "":
		js, err = jetstream.NewWithDomain(nc, domain)
	case apiPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, apiPrefix)
	default:
		js, err = jetstream.New(nc)
	}
	if err != nil {
		return nil, fmt.Errorf("natslock: %w", err)
	}
	return New(js, opts...)
}
