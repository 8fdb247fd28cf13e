package natslock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/natslock"
)

// These examples need a NATS server with JetStream (nats-server -js), so
// they are compiled but not run by go test.

func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	p, err := natslock.New(js, natslock.WithBucket("locks"), natslock.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	err = core.Do(ctx, p.Mutex("reports/daily"), func(ctx context.Context) error {
		// ctx ends if the lock is lost; pass the token to what you write.
		fmt.Println("building the daily report")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleProvider_Mutex() {
	p := provider()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	h, err := p.Mutex("invoices/2024-06").Acquire(ctx)
	if errors.Is(err, core.ErrNotAcquired) {
		fmt.Println("someone else is on it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(context.Background())
	fmt.Println("holding with fencing token", h.FencingToken())
}

func ExampleProvider_Holder() {
	p := provider()
	id, token, err := p.Holder(context.Background(), "scheduler/leader")
	if err != nil {
		log.Fatal(err)
	}
	if id == "" {
		fmt.Println("nobody leads")
		return
	}
	fmt.Printf("%s leads (term %d)\n", id, token)
}

func ExampleProvider_RWMutex() {
	p := provider()
	ctx := context.Background()
	rw := p.RWMutex("catalog")

	r, err := rw.RLocker().Acquire(ctx) // many readers at once
	if err != nil {
		log.Fatal(err)
	}
	_ = r.Release(ctx)

	w, err := rw.Acquire(ctx) // alone; new readers wait once a writer waits
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Release(ctx)
}

func ExampleProvider_Semaphore() {
	p := provider()
	ctx := context.Background()
	// At most three exports at once, across every process.
	err := core.Do(ctx, p.Semaphore("exports", 3), func(ctx context.Context) error {
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

func provider() *natslock.Provider {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	p, err := natslock.New(js)
	if err != nil {
		log.Fatal(err)
	}
	return p
}
