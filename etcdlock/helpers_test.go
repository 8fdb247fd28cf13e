package etcdlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/distlock/distlock/core/locktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Tests share one prefix and a short TTL, so abandoned locks free fast; the
// conformance suite's child processes use the same.
const (
	testPrefix = "distlock-test/"
	testTTL    = 2 * time.Second
	// The clients ping a silent connection as Open's do, so that a frozen
	// member is dropped (gRPC pings no more often than every 10 s).
	testKeepAlive        = 10 * time.Second
	testKeepAliveTimeout = 2 * time.Second
)

// endpoints returns the test server's client URLs.
func endpoints(t testing.TB) []string {
	t.Helper()
	return strings.Split(locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS"), ",")
}

// connect opens a client on endpoints, closed by t.Cleanup (after the
// Providers made on it, which are cleaned up first).
func connect(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    testKeepAlive,
		DialKeepAliveTimeout: testKeepAliveTimeout,
		Logger:               zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newProvider returns a Provider on a new client to the shared test
// server, closed by t.Cleanup.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	return newProviderOn(t, connect(t, endpoints(t)), opts...)
}

func newProviderOn(t testing.TB, cli *clientv3.Client, opts ...Option) *Provider {
	t.Helper()
	p, err := New(cli, append([]Option{WithPrefix(testPrefix), WithTTL(testTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// lockName returns a name unique to this test run.
func lockName(t testing.TB) string {
	return fmt.Sprintf("%s/%08x", t.Name(), rand.Uint32())
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
