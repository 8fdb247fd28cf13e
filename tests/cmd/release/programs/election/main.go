// Command election runs one candidate of a leader election over filelock
// until it is promoted, then ends. The release check (tests/cmd/release)
// builds it against the packed modules and requires that it pulls in no
// Redis, PostgreSQL or NATS driver.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
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
	e, err := election.New(p.Mutex("leader"), election.Config{
		OnPromote: func(_ context.Context, term uint64) {
			fmt.Println("election: promoted, term", term)
			cancel()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
