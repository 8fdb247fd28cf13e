// Command redislock takes and releases one mutex on the Redis server at
// $REDIS_ADDR (default 127.0.0.1:6379). The release check
// (tests/cmd/release) builds it against the packed modules and requires that
// it pulls in no PostgreSQL or NATS driver.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	p, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := lockOnce(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}

func lockOnce(ctx context.Context, p core.Provider) error {
	h, err := p.Mutex("release-check").Acquire(ctx)
	if err != nil {
		return err
	}
	fmt.Println("redislock: fencing token", h.FencingToken())
	return h.Release(ctx)
}
