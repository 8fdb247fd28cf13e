package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/distlock/distlock/redislock/redisop"
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

// newProvider returns a Provider on the shared test server with a short TTL.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	p, err := New(redistest.Client(t, redistest.Addr(t)), append([]Option{WithTTL(testTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// uniqueName returns a lock name no other run uses.
func uniqueName(t testing.TB) string {
	return t.Name() + "/" + redisop.NewOwner()[:12]
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

// keyBase is what every key of the lock or group called name starts with
// (redisop.Client documents the layout).
func keyBase(p *Provider, name string) string {
	return p.cfg.prefix + "{" + kit.SafeName(name) + "}:"
}
