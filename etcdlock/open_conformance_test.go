package etcdlock

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// TestConformanceURL runs the conformance suite on Providers made by Open
// from an etcd:// URL, built from the environment alone, as the
// abandonment cases' child processes build theirs.
func TestConformanceURL(t *testing.T) {
	cfg := conformance()
	cfg.New = func(t testing.TB) core.Provider {
		url := "etcd://" + strings.Join(endpoints(t), ",") + "?ttl=" + testTTL.String() +
			"&prefix=" + testPrefix + "&identity=url-test&keepalive=" + testKeepAlive.String()
		p, err := Open(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		return p
	}
	locktest.TestProvider(t, cfg)
}
