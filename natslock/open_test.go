package natslock

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// openURL opens the shared test server's URL with query, closing the
// Provider (and its connection) with the test.
func openURL(t testing.TB, query string) *Provider {
	t.Helper()
	p, err := Open(context.Background(), locktest.RequireEnv(t, "DISTLOCK_NATS_URL")+"?"+query)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The conformance suite through a nats:// URL, on a connection the
// Provider owns.
func TestConformanceURL(t *testing.T) {
	cfg := conformance()
	cfg.New = func(t testing.TB) core.Provider {
		return openURL(t, "bucket="+testBucket+"&ttl="+testTTL.String()+"&member_max_ttl="+testMemberMaxTTL.String()+"&renew_interval="+(testTTL/4).String()+"&identity=url-test&connect_timeout=5s")
	}
	locktest.TestProvider(t, cfg)
}

// Close closes the connection Open made.
func TestOpenOwnsConn(t *testing.T) {
	p := openURL(t, "bucket="+testBucket+"&ttl="+testTTL.String())
	nc := p.js.Conn()
	require.True(t, nc.IsConnected())
	require.NoError(t, p.Close())
	require.True(t, nc.IsClosed(), "the connection is still open after Close")
}

func TestOpenBadURL(t *testing.T) {
	for _, bad := range []string{
		"nats://", "tls://h:4222", "nats://h:4222/bucket", "nats://h?bucket=no/slash", "nats://h?ttl=x", "nats://h?renew_interval=soon",
		"nats://h?js_domain=a&js_api_prefix=b", "nats://h?connect_timeout=0s", "nats://h?prefix=x",
	} {
		p, err := Open(context.Background(), bad)
		if !errors.Is(err, core.ErrInvalidArgument) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
