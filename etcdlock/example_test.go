package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/etcdlock"
)

// The examples need an etcd server; TestExamples runs them where make test
// provides one.

func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	p, err := etcdlock.New(cli, etcdlock.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close() // revokes the lease: whatever is still held is freed at once

	err = core.Do(context.Background(), p.Mutex("reports/daily"), func(ctx context.Context) error {
		// ctx ends if the lock is lost; pass the token to what you write.
		fmt.Println("building the daily report")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleProvider_Mutex() {
	p, done := provider()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	h, err := p.Mutex("invoices/2024-06").Acquire(ctx) // waits in line, in arrival order
	if errors.Is(err, core.ErrNotAcquired) {
		fmt.Println("someone else is on it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(context.Background())
	fmt.Println("holding with fencing token", h.FencingToken() > 0)
}

func ExampleProvider_Holder() {
	p, done := provider()
	defer done()
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
	p, done := provider()
	defer done()
	ctx := context.Background()
	rw := p.RWMutex("catalog")

	r, err := rw.RLocker().Acquire(ctx) // shares with the readers ahead of it
	if err != nil {
		log.Fatal(err)
	}
	_ = r.Release(ctx)

	w, err := rw.Acquire(ctx) // alone; readers that come after it wait
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Release(ctx)
}

func ExampleProvider_Semaphore() {
	p, done := provider()
	defer done()
	// At most three exports at once, across every process.
	err := core.Do(context.Background(), p.Semaphore("exports", 3), func(ctx context.Context) error {
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

func provider() (*etcdlock.Provider, func()) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	p, err := etcdlock.New(cli)
	if err != nil {
		log.Fatal(err)
	}
	return p, func() {
		_ = p.Close()
		_ = cli.Close()
	}
}

func endpoints() []string {
	if eps := os.Getenv("DISTLOCK_ETCD_ENDPOINTS"); eps != "" {
		return strings.Split(eps, ",")
	}
	return []string{"127.0.0.1:2379"}
}

// TestExamples runs the examples against the test server.
func TestExamples(t *testing.T) {
	locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS")
	for _, ex := range []func(){Example, ExampleProvider_Mutex, ExampleProvider_Holder, ExampleProvider_RWMutex, ExampleProvider_Semaphore} {
		ex()
	}
}
