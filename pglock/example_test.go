package pglock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// These examples need a server (DISTLOCK_PG_URL), so they have no Output
// and only compile; TestExamples runs them.

func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DISTLOCK_PG_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks, err := pglock.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	h, err := locks.Mutex("nightly-report").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	// Run the work under h.Context(): it ends if the connection holding
	// the lock is lost. Pass the fencing token to the storage you write to.
	fmt.Println("holding, token > 0:", h.FencingToken() > 0)
}

func ExampleProvider_RWMutex() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DISTLOCK_PG_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks, err := pglock.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	rw := locks.RWMutex("config")
	r, err := rw.RLocker().TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Release(ctx)
	fmt.Println("reading")
}

func ExampleProvider_AcquireTx() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DISTLOCK_PG_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks, err := pglock.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	token, err := locks.AcquireTx(ctx, tx, "invoice-42")
	if err != nil {
		log.Fatal(err)
	}
	// ... work in tx; the lock ends with Commit or Rollback.
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed under token", token)
}

func ExampleKeyOf() {
	for _, name := range []string{"job-42", "00000000000004d2", "a much longer lock name"} {
		k, _ := pglock.KeyOf(name)
		fmt.Println(k.IsPair(), k)
	}
	// Output:
	// true 6adf896b,46400000
	// false 00000000000004d2
	// false e6c8a272a2eb5afc
}

// TestExamples runs the examples that need a server.
func TestExamples(t *testing.T) {
	locktest.RequireEnv(t, "DISTLOCK_PG_URL")
	for _, ex := range []func(){Example, ExampleProvider_RWMutex, ExampleProvider_AcquireTx} {
		ex()
	}
}
