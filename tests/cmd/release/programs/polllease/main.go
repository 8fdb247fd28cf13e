// Command polllease polls three targets with one polllease instance over
// filelock until each was polled once, then ends. The release check
// (tests/cmd/release) builds it against the packed modules and requires that
// it pulls in no Redis, PostgreSQL or NATS driver.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/polllease"
)

func main() {
	dir, err := os.MkdirTemp("", "distlock-consumer-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	targets := []string{"a", "b", "c"}
	var mu sync.Mutex
	polled := map[string]bool{}
	c, err := polllease.New(polllease.Config{
		Provider:          p,
		Membership:        p,
		ReconcileInterval: 100 * time.Millisecond,
		Targets:           func(context.Context) ([]string, error) { return targets, nil },
		Poll: func(_ context.Context, target string, token uint64) error {
			mu.Lock()
			defer mu.Unlock()
			if !polled[target] {
				fmt.Println("polllease: polled", target, "with token", token)
			}
			polled[target] = true
			if len(polled) == len(targets) {
				cancel()
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
