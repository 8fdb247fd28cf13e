package distlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/core"
)

// FuzzOpen feeds Open any string, with a context already cancelled so that
// a URL that parses stops before any I/O. Open must not panic, return
// (nil, nil) or a Provider; its error must match core.ErrInvalidArgument
// or the context's error. The seeds
// run with every go test.
func FuzzOpen(f *testing.F) {
	for _, seed := range []string{
		"", "redis", "redis://", "redis://h", "redis://u:p@h:6379/0?ttl=10s&prefix=x:",
		"rediss://h?dial_timeout=1s", "redis+cluster://a:1,b:2,[::1]:3", "redis://h/notadb",
		"redlock://a:1,b:2,c:3/2?min_validity=1s&restart_guard=0s", "redlocks://a,,b",
		"postgres://u:p@h1,h2:5433/db?sslmode=disable&pool_max_conns=3&keepalive=1s",
		"postgresql://h/db?fence_table=a.b&members_table=x", "postgres://h/db?ttl=1s",
		"nats://tok@h:4222,h2?bucket=b&js_domain=d", "nats+tls://h?js_api_prefix=p&connect_timeout=1s",
		"file:///var/lock/app?identity=x&check_interval=1s", "file://localhost/", "mem://", "mem://name?identity=%ff",
		"etcd://h", "mysql://h", "REDIS://H", "redis://h#x", "redis://[::1", "redis://h:99999",
		"redis://h?ttl=1s&ttl=2s", "redis://h?a=%zz", "x://@", "://", "redis://h?handoff_max=1&handoff_span=-1s",
		"redis://%zz@h", "redis://u:p@h@i/", "file:///%00",
	} {
		f.Add(seed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := distlock.Open(ctx, raw)
		if p != nil {
			_ = p.Close()
			t.Fatalf("Open(%q) returned a Provider under a cancelled context (err %v)", raw, err)
		}
		switch {
		case err == nil:
			t.Fatalf("Open(%q) = nil, nil", raw)
		case errors.Is(err, core.ErrInvalidArgument), errors.Is(err, core.ErrUnsupported), errors.Is(err, context.Canceled):
		default:
			t.Fatalf("Open(%q) = %v: matches no expected error", raw, err)
		}
	})
}
