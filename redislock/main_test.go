package redislock

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core/locktest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis re-dials a dead server in the background for up to a
		// second after its client is closed.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// testTTL is short so that abandoned grants free fast.
const testTTL = 2 * time.Second

// redisAddr is the first server of DISTLOCK_REDIS_ADDRS; the test skips
// without it.
func redisAddr(t testing.TB) string {
	t.Helper()
	addrs := locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS")
	return strings.TrimSpace(strings.Split(addrs, ",")[0])
}

func newRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newProvider returns a Provider on the shared test server with a short TTL.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	p, err := New(newRedis(t, redisAddr(t)), append([]Option{WithTTL(testTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// uniqueName returns a lock name no other run uses.
func uniqueName(t testing.TB) string {
	return t.Name() + "/" + NewOwner()[:12]
}

// uniquePrefix returns a key prefix no other run uses.
func uniquePrefix() string {
	return "distlock-test-" + NewOwner()[:12] + ":"
}

// scanKeys lists the keys under prefix.
func scanKeys(t testing.TB, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	return keys
}

// waitDone waits for ctx to end, failing the test after within.
func waitDone(t testing.TB, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("context still not done after %v", within)
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
