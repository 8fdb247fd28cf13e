package mysqllock

import (
	"context"
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// TestConformanceURL runs the conformance suite on Providers made by Open
// from a mysql:// URL built from DISTLOCK_MYSQL_DSN.
func TestConformanceURL(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider {
		dsn, err := mysql.ParseDSN(locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN"))
		require.NoError(t, err)
		u := url.URL{Scheme: "mysql", Host: dsn.Addr, Path: "/" + dsn.DBName,
			RawQuery: "keepalive=" + testKeepalive.String() + "&identity=url-test&max_conns=4"}
		if dsn.Passwd != "" {
			u.User = url.UserPassword(dsn.User, dsn.Passwd)
		} else {
			u.User = url.User(dsn.User)
		}
		p, err := Open(context.Background(), u.String())
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
