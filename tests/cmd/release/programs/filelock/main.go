// Command filelock takes and releases one mutex in a throwaway directory with
// filelock. The release check (tests/cmd/release) builds it against the
// packed modules, runs it, and requires that it pulls in no Redis,
// PostgreSQL or NATS driver.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/distlock/distlock/core"
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
	if err := lockOnce(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}

func lockOnce(ctx context.Context, p core.Provider) error {
	h, err := p.Mutex("release-check").Acquire(ctx)
	if err != nil {
		return err
	}
	fmt.Println("filelock: fencing token", h.FencingToken())
	return h.Release(ctx)
}
