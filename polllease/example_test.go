package polllease_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/polllease"
)

// Assign spreads targets over the live instances; every instance computes
// the same result from the same inputs.
func ExampleAssign() {
	targets := []string{"endpoint-1", "endpoint-2", "endpoint-3", "endpoint-4", "endpoint-5", "endpoint-6"}
	members := []string{"web-a", "web-b", "web-c"}
	assign := polllease.Assign(targets, members, polllease.DefaultLoadFactor)
	load := map[string]int{}
	for _, m := range assign {
		load[m]++
	}
	fmt.Println("capacity:", polllease.Capacity(len(targets), len(members), polllease.DefaultLoadFactor))
	fmt.Println("every target assigned:", len(assign) == len(targets))
	fmt.Println("within capacity:", load["web-a"] <= 2 && load["web-b"] <= 2 && load["web-c"] <= 2)
	// Output:
	// capacity: 2
	// every target assigned: true
	// within capacity: true
}

// A Coordinator over any backend that offers both a core.Provider and a
// core.Membership, such as a *redislock.Provider, a *pglock.Provider or a
// *natslock.Provider. Give the Provider polllease.RecommendedLeaseTTL (15 s,
// renewed every 5 s; their own default is 30 s) so that a crashed
// instance's targets move within 21 s.
func ExampleNew() {
	var store interface {
		core.Provider
		core.Membership
	} // for example: store, err := redislock.New(rdb, redislock.WithTTL(polllease.RecommendedLeaseTTL))

	c, err := polllease.New(polllease.Config{
		Provider:   store,
		Membership: store,
		Group:      "sessions",
		Targets: func(ctx context.Context) ([]string, error) {
			return []string{"session-1", "session-2", "session-3"}, nil // from your database
		},
		Poll: func(ctx context.Context, session string, token uint64) error {
			// Poll the session; ctx ends as soon as the lease is lost.
			// Pass token to what you write, so a stale poller is refused.
			return nil
		},
		PollInterval: func(session string) time.Duration { return 30 * time.Second },
		TargetKey:    "endpoint",     // log lines carry endpoint=… rather than target=…
		RoutineLevel: slog.LevelInfo, // log every renewal and poll start too
		OnEvent: func(e polllease.Event) {
			if e.Kind == polllease.EventLost {
				log.Printf("lost %s: %v", e.Target, e.Err)
			}
		},
	})
	if err != nil {
		log.Fatal(err) // a bad Config: the error matches core.ErrInvalidArgument
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Run until interrupted; then release every lease and deregister.
	if err := c.Run(ctx); err != nil {
		log.Print(err)
	}
}

// One instance over the file backend (no server) takes every target, polls
// each under its lease, and releases them all when it stops.
func ExampleCoordinator_Run() {
	dir, err := os.MkdirTemp("", "polllease-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	var mu sync.Mutex
	polled := map[string]bool{}
	c, err := polllease.New(polllease.Config{
		Provider:          store,
		Membership:        store,
		InstanceID:        "web-1",
		HeartbeatTTL:      3 * time.Second,
		HeartbeatInterval: time.Second,
		ReconcileInterval: 100 * time.Millisecond,
		Targets: func(context.Context) ([]string, error) {
			return []string{"endpoint-a", "endpoint-b", "endpoint-c"}, nil
		},
		Poll: func(ctx context.Context, target string, token uint64) error {
			mu.Lock()
			defer mu.Unlock()
			polled[target] = true
			return nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()

	for { // wait until every target has been polled once
		mu.Lock()
		n := len(polled)
		mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("owned:", c.Owned())
	fmt.Println("preferred owner of endpoint-a:", c.PreferredOwner("endpoint-a"))
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("after stop:", c.Owned())
	// Output:
	// owned: [endpoint-a endpoint-b endpoint-c]
	// preferred owner of endpoint-a: web-1
	// after stop: []
}
