package pglock

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/stretchr/testify/require"
)

// withQuery adds query parameters to a postgres:// URL.
func withQuery(url, query string) string {
	if strings.Contains(url, "?") {
		return url + "&" + query
	}
	return url + "?" + query
}

// The conformance suite through a postgres:// URL, with a pool the
// Provider owns; the pool settings ride in the URL too.
func TestConformanceURL(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider {
		url := withQuery(locktest.RequireEnv(t, "DISTLOCK_PG_URL"),
			"keepalive="+testKeepalive.String()+"&identity=url-test&pool_max_conns=4&application_name=pglock-url-test")
		p, err := Open(context.Background(), url)
		require.NoError(t, err)
		providers.Store(p, struct{}{})
		t.Cleanup(func() {
			providers.Delete(p)
			require.NoError(t, p.Close())
		})
		return p
	}
	locktest.TestProvider(t, cfg)
}

// Close closes the pool Open made.
func TestOpenOwnsPool(t *testing.T) {
	p, err := Open(context.Background(), locktest.RequireEnv(t, "DISTLOCK_PG_URL"))
	require.NoError(t, err)
	require.NoError(t, p.pool.Ping(context.Background()))
	require.NoError(t, p.Close())
	require.Error(t, p.pool.Ping(context.Background()), "the pool still answers after Close")
}

func TestOpenBadURL(t *testing.T) {
	for _, bad := range []string{
		"postgres://", "mysql://h/db", "postgres://h/db?keepalive=x", "postgres://h/db?max_conns=1",
		"postgres://h/db?fence_table=a.b.c", "postgres://h/db?sslmode=bogus", "postgres://h/db?pool_max_conns=x",
		"postgres://h/db?ttl=1s&ttl=2s", "postgres://h/db?identity=",
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
