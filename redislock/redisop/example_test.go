package redisop_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
)

// Client is the single-server layer under redisop.Provider and each
// server of redlock: one script call per operation, no waiting and no
// renewal.
func ExampleClient() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c, err := redisop.NewClient(rdb, "distlock:")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lock := redisop.Lock{Kind: redisop.KindMutex, Name: "job"}
	owner := redisop.NewOwner()

	r, err := c.Acquire(ctx, lock, owner, 10*time.Second, 0)
	if err != nil {
		log.Fatal(err)
	}
	if !r.Acquired {
		fmt.Println("busy; the holder's grant has", r.RetryIn, "left")
		return
	}
	g := redisop.Grant{Lock: lock, Owner: owner}
	if err := c.Extend(ctx, g, 10*time.Second); err != nil {
		log.Fatal(err) // matches core.ErrLockLost when the grant is gone
	}
	if _, err := c.Release(ctx, g); err != nil {
		log.Fatal(err)
	}
}
