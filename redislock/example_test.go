package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock"
	"github.com/redis/go-redis/v9"
)

// The whole life of a lock: make a Provider once, acquire, work under the
// handle's context with its fencing token, release.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := redislock.New(rdb, redislock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := p.Mutex("invoice:42").Acquire(ctx)
	if err != nil {
		log.Fatal(err) // busy past the deadline, or Redis unreachable
	}
	defer h.Release(context.Background())

	// The context ends if the lease cannot be renewed; the token lets the
	// store refuse writes from a holder that has lost the lock.
	fmt.Println("working as holder", h.FencingToken())
	<-h.Context().Done()
}

// TryAcquire makes one attempt and tells a busy lock from a failure.
func ExampleProvider_Mutex() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	h, err := p.Mutex("nightly-report").TryAcquire(context.Background())
	switch {
	case errors.Is(err, core.ErrNotAcquired):
		fmt.Println("another instance runs the report")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer h.Release(context.Background())
	fmt.Println("running the report")
}

// Readers share the lock; a writer waits for them and keeps new readers out
// meanwhile.
func ExampleProvider_RWMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()

	config := p.RWMutex("config")
	err = core.Do(ctx, config.RLocker(), func(ctx context.Context) error {
		fmt.Println("reading the config")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	err = core.Do(ctx, config, func(ctx context.Context) error {
		fmt.Println("rewriting the config")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A semaphore admits a fixed number of holders at once.
func ExampleProvider_Semaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	err = core.Do(context.Background(), p.Semaphore("api-quota", 3), func(ctx context.Context) error {
		fmt.Println("one of at most three callers")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Instances register under a group and refresh before the TTL runs out;
// Members lists the live ones by the server's clock.
func ExampleProvider_Members() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	p, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()

	if err := p.Register(ctx, "pollers", "host-a", 30*time.Second); err != nil {
		log.Fatal(err)
	}
	ids, err := p.Members(ctx, "pollers")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)
}

// New checks its options before any I/O.
func ExampleNew_invalid() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	_, err := redislock.New(rdb, redislock.WithTTL(10*time.Second), redislock.WithRenewInterval(20*time.Second))
	fmt.Println(errors.Is(err, core.ErrInvalidArgument))
	_, err = redislock.New(nil)
	fmt.Println(err)
	// Output:
	// true
	// distlock: invalid argument: redislock: nil redis client
}
