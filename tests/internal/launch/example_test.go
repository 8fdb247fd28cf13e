package launch_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/tests/internal/launch"
)

// A fault test runs its own Redis server, restarts it under the client and
// checks that the client comes back.
func ExampleRedis() {
	var t testing.TB // the test's *testing.T

	srv := launch.Redis(t, launch.RedisConfig{AOF: true})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	rdb.Set(ctx, "k", "v", 0)
	srv.Kill(t)  // a crash: SIGKILL, or a container stop without grace
	srv.Start(t) // same address, same data (AOF)
	if v, _ := rdb.Get(ctx, "k").Result(); v != "v" {
		t.Fatalf("k = %q after the restart, want v", v)
	}
}
