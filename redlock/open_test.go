package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/redlock"
)

// redlockURL lists the first n shared servers in a redlock:// URL, after
// marking their data sets old as sharedClients does.
func redlockURL(t testing.TB, n int, query string) string {
	t.Helper()
	sharedClients(t, n)
	addrs := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")[:n]
	return "redlock://" + strings.Join(addrs, ",") + "/0?" + query
}

// The conformance suite through a redlock:// URL over three servers, with
// clients the Provider owns.
func TestConformanceURL(t *testing.T) {
	locktest.TestProvider(t, locktest.Config{
		New: func(t testing.TB) core.Provider {
			p, err := redlock.Open(context.Background(), redlockURL(t, 3, "ttl="+testTTL.String()+"&min_validity=2s&dial_timeout=2s"))
			require.NoError(t, err)
			require.Equal(t, 2, p.Quorum())
			t.Cleanup(func() { _ = p.Close() })
			return p
		},
		Break:         func(t testing.TB, h core.Handle) { breakGrant(sharedClients(t, 3))(t, h) },
		LostWithin:    testTTL,
		AbandonWithin: testTTL,
	})
}

func TestOpenBadURL(t *testing.T) {
	for _, bad := range []string{
		"redlock://", "redis://a:1,b:2", "redlock://a:1,b:2?ttl=x", "redlock://a:1?identity=",
		"redlock://a:1?min_validity=1h", "redlock://a:1/db", "redlock://a:1?bogus=1",
	} {
		p, err := redlock.Open(context.Background(), bad)
		if !errors.Is(err, core.ErrInvalidArgument) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
