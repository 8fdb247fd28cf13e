// Command redlock takes and releases one mutex on the Redis servers listed,
// comma-separated, in $REDIS_ADDRS (default 127.0.0.1:6379). The release
// check (tests/cmd/release) builds it against the packed modules and
// requires that it pulls in no PostgreSQL or NATS driver.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	var clients []redis.UniversalClient
	for addr := range strings.SplitSeq(cmp.Or(os.Getenv("REDIS_ADDRS"), "127.0.0.1:6379"), ",") {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		clients = append(clients, rdb)
	}
	p, err := redlock.New(clients)
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
	fmt.Println("redlock: fencing token", h.FencingToken())
	return h.Release(ctx)
}
