// Command natslock takes and releases one mutex on the NATS JetStream server
// at $NATS_URL (default nats://127.0.0.1:4222). The release check
// (tests/cmd/release) builds it against the packed modules and requires that
// it pulls in no Redis or PostgreSQL driver.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/natslock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	nc, err := nats.Connect(cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	p, err := natslock.New(js)
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
	fmt.Println("natslock: fencing token", h.FencingToken())
	return h.Release(ctx)
}
