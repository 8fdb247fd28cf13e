package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgxpool starts this after a connection is destroyed; it sleeps
		// 500 ms and exits on its own, and Pool.Close does not wait for it.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).triggerHealthCheck.func1"))
}

// testKeepalive is the keepalive cadence of the test Providers.
const testKeepalive = time.Second

// newPool returns a pool on DISTLOCK_PG_URL, closed when the test ends.
func newPool(t testing.TB, tune ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	url := locktest.RequireEnv(t, "DISTLOCK_PG_URL")
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	for _, f := range tune {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// providers maps the test Providers, so Break can find a handle's connection.
var providers sync.Map // *Provider → struct{}

// newProvider returns a Provider with a short keepalive on a pool of its
// own, closed when the test ends.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	return newProviderOn(t, newPool(t), opts...)
}

func newProviderOn(t testing.TB, pool *pgxpool.Pool, opts ...Option) *Provider {
	t.Helper()
	p, err := New(pool, append([]Option{WithKeepalive(testKeepalive)}, opts...)...)
	require.NoError(t, err)
	providers.Store(p, struct{}{})
	t.Cleanup(func() {
		providers.Delete(p)
		require.NoError(t, p.Close())
	})
	return p
}

// uniqueName returns a lock name no other test or run uses.
func uniqueName(t testing.TB, suffix string) string {
	return fmt.Sprintf("pglock-test/%s/%08x/%s", t.Name(), rand.Uint32(), suffix)
}

// backendPID returns the server process id of the connection holding h.
func backendPID(t testing.TB, h core.Handle) uint32 {
	t.Helper()
	var pid uint32
	providers.Range(func(k, _ any) bool {
		p := k.(*Provider)
		for _, c := range p.sess.Conns() {
			for _, g := range c.Grants() {
				if core.Handle(g.Handle()) == h {
					pid = c.Conn.pc.PgConn().PID()
					return false
				}
			}
		}
		return true
	})
	require.NotZero(t, pid, "no connection holds the handle")
	return pid
}

// terminate ends the server session holding h, as an operator would.
func terminate(t testing.TB, h core.Handle) {
	t.Helper()
	pid := backendPID(t, h)
	pool := newPool(t)
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int64(pid)).Scan(&ok))
	require.True(t, ok, "pg_terminate_backend(%d)", pid)
}

// waitDone reports whether ctx is done within d.
func waitDone(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// pgxpoolNew makes a pool without connecting.
func pgxpoolNew(cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

func itoa(n uint16) string { return strconv.Itoa(int(n)) }

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
