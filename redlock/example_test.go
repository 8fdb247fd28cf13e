package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redlock"
)

// Five independent Redis servers: the lock holds while any three agree.
func Example() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379", "redis-d:6379", "redis-e:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	locks, err := redlock.New(clients, redlock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := locks.Mutex("billing/run").Acquire(ctx)
	if err != nil {
		log.Fatal(err) // errors.Is(err, core.ErrNotAcquired) when the wait timed out
	}
	defer h.Release(context.Background())

	// The handle's context ends if a majority stops confirming the lease.
	fmt.Println("running with fencing token", h.FencingToken())
	runBilling(h.Context(), h.FencingToken())
}

func runBilling(context.Context, uint64) {}
