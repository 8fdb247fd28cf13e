package distlock_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/core/memlock"
	"github.com/go-sql-driver/mysql"
)

func bg() context.Context { return context.Background() }

// serverURLs returns a URL of every scheme that a server of make test
// answers, built from the environment scripts/services.sh writes.
func serverURLs(t *testing.T) map[string]string {
	redis := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")
	cluster := locktest.RequireEnv(t, "DISTLOCK_REDIS_CLUSTER_ADDRS")
	pg := locktest.RequireEnv(t, "DISTLOCK_PG_URL")
	my, err := mysql.ParseDSN(locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN"))
	if err != nil {
		t.Fatalf("DISTLOCK_MYSQL_DSN: %v", err)
	}
	return map[string]string{
		"file":          "file://" + filepath.ToSlash(t.TempDir()) + "?identity=meta",
		"mem":           "mem://?identity=meta",
		"redis":         "redis://" + redis[0] + "/0?ttl=5s&identity=meta&prefix=meta:",
		"redis+cluster": "redis+cluster://" + cluster + "?ttl=5s",
		"redlock":       "redlock://" + strings.Join(redis[:3], ",") + "?ttl=5s&restart_guard=0s&prefix=meta:&identity=meta",
		"postgres":      pg,
		"postgresql":    "postgresql" + strings.TrimPrefix(pg, "postgres"),
		"nats":          locktest.RequireEnv(t, "DISTLOCK_NATS_URL") + "?bucket=distlock_meta&ttl=5s",
		"mysql":         "mysql://" + my.User + "@" + my.Addr + "/" + my.DBName + "?identity=meta",
		"etcd":          "etcd://" + locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS") + "?ttl=5s&prefix=meta/&keepalive=12s",
	}
}

// Every scheme with a server opens, grants and releases a lock, and its
// Close closes the client it made.
func TestOpenEveryScheme(t *testing.T) {
	for scheme, url := range serverURLs(t) {
		t.Run(scheme, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
			defer cancel()
			p, err := distlock.Open(ctx, url)
			if err != nil {
				t.Fatalf("Open(%q): %v", url, err)
			}
			defer func() {
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			name := "meta/" + t.Name()
			h, err := p.Mutex(name).Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if h.FencingToken() == 0 {
				t.Fatal("token 0")
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// The TLS forms parse: with a cancelled context Open stops before dialing.
func TestOpenTLSForms(t *testing.T) {
	ctx, cancel := context.WithCancel(bg())
	cancel()
	for _, url := range []string{
		"rediss://u:p@h:6380/1", "rediss+cluster://h1:1,h2:2", "redlocks://a:1,b:2,c:3",
		"nats+tls://h:4222", "postgres://h/db?sslmode=verify-full",
	} {
		if _, err := distlock.Open(ctx, url); !errors.Is(err, context.Canceled) {
			t.Errorf("Open(%q) = %v, want context.Canceled", url, err)
		}
	}
}

// The conformance suite through distlock.Open, on mem://; each backend's
// own tests run it through its URLs on a server.
func TestConformanceMem(t *testing.T) {
	const url = "mem://conformance?identity=meta"
	open := func(t testing.TB) distlock.Provider {
		p, err := distlock.Open(bg(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	locktest.TestProvider(t, locktest.Config{
		New: func(t testing.TB) core.Provider { return open(t) },
		Break: func(t testing.TB, h core.Handle) {
			if !open(t).(*memlock.Provider).BreakHandle(h) {
				t.Fatal("BreakHandle: the handle holds nothing")
			}
		},
	})
}

func TestOpenBadURL(t *testing.T) {
	dir := filepath.ToSlash(t.TempDir())
	for _, c := range []struct{ url, part string }{
		{"", "scheme"},
		{"localhost:6379", "scheme"},
		{"zookeeper://h", "scheme"},
		{"redis://", "host"},
		{"redis://a:1,b:2", "host"},
		{"redis://h:notaport", "host"},
		{"postgres:///db", "host"},
		{"mysql://h", "path"},
		{"etcd://", "host"},
		{"etcd://h:2379/x", "path"},
		{"etcd://h:2379?ttl=soon", "parameter ttl"},
		{"etcd://h:2379?bucket=b", "parameter bucket"},
		{"etcd://h:2379?keepalive=0s", "parameter keepalive"},
		{"mysql://h1,h2/db", "host"},
		{"mysql://h/db?keepalive=soon", "parameter keepalive"},
		{"nats://", "host"},
		{"redlock://", "host"},
		{"file://otherhost/x", "host"},
		{"file://", "path"},
		{"mem://x/y", "path"},
		{"redis://h?ttl=soon", "parameter ttl"},
		{"redis://h?handoff_max=many", "parameter handoff_max"},
		{"nats://h?member_max_ttl=1", "parameter member_max_ttl"},
		{"postgres://h/db?keepalive=", "parameter keepalive"},
		{"postgres://h/db?ttl=10s", "parameter ttl"},
		{"file://" + dir + "?bucket=b", "parameter bucket"},
		{"mem://?prefix=p", "parameter prefix"},
		{"nats://h?prefix=p", "parameter prefix"},
		{"redis://h?prefix=a&prefix=b", "parameter prefix"},
		{"redis://h?bogus=1", "go-redis options"},
		{"redlock://a:1?bogus=1", "go-redis options"},
		{"postgres://h/db?sslmode=sometimes", "pgx connection string"},
		{"redis://u:hunter2@h#top", "fragment"},
	} {
		p, err := distlock.Open(bg(), c.url)
		if p != nil {
			_ = p.Close()
			t.Errorf("Open(%q) returned a Provider and %v", c.url, err)
			continue
		}
		if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), ": "+c.part+": ") {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument naming %s", c.url, err, c.part)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): the error shows the password: %v", c.url, err)
		}
	}
}

// A value out of the backend's bounds fails in Open as in New.
func TestOpenOptionBounds(t *testing.T) {
	for _, url := range []string{"redis://h?ttl=-1s", "redlock://a:1?ttl=48h", "mem://?identity=%ff"} {
		if _, err := distlock.Open(bg(), url); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", url, err)
		}
	}
}
