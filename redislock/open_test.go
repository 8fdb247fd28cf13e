package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// openURL opens rawURL, with the test's short TTL, and closes the Provider
// (and its client) with the test.
func openURL(t testing.TB, rawURL string) *Provider {
	t.Helper()
	p, err := Open(context.Background(), rawURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The conformance suite through a redis:// URL: one server, a client the
// Provider owns.
func TestConformanceURL(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider {
		return openURL(t, "redis://"+redistest.Addr(t)+"/0?ttl="+testTTL.String()+"&identity=url-test&dial_timeout=2s")
	}
	locktest.TestProvider(t, cfg)
}

// The same through a redis+cluster:// URL listing every node.
func TestClusterConformanceURL(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider {
		addrs := locktest.RequireEnv(t, "DISTLOCK_REDIS_CLUSTER_ADDRS")
		return openURL(t, "redis+cluster://"+strings.ReplaceAll(addrs, " ", "")+"?ttl="+testTTL.String())
	}
	locktest.TestProvider(t, cfg)
}

// Close closes the client Open made.
func TestOpenOwnsClient(t *testing.T) {
	p, err := Open(context.Background(), "redis://"+redistest.Addr(t))
	require.NoError(t, err)
	h, err := p.Mutex(uniqueName(t)).TryAcquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, h.Release(context.Background()))
	require.NoError(t, p.Close())
	require.Error(t, p.client.Redis().Ping(context.Background()).Err(), "the client still answers after Close")
}

func TestOpenBadURL(t *testing.T) {
	for _, bad := range []string{
		"redis://", "redis://a:1,b:2", "rediss+cluster://", "redis+cluster://a:1/3", "memcache://h",
		"redis://h?ttl=x", "redis://h?ttl=0s", "redis://h?no_such_option=1", "redis://h/notadb",
		"redis://h?handoff_max=-1", "redis://h?prefix=a&prefix=b", "redis://h:99999",
	} {
		p, err := Open(context.Background(), bad)
		if !errors.Is(err, core.ErrInvalidArgument) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Open(ctx, "redis://h")
	require.ErrorIs(t, err, context.Canceled)
}
