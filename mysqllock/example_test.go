package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

// These examples need a server (DISTLOCK_MYSQL_DSN), so they have no Output
// and only compile; TestExamples runs them.

func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("DISTLOCK_MYSQL_DSN")) // "user:pass@tcp(host:3306)/db"
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locks, err := mysqllock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	err = core.Do(ctx, locks.Mutex("nightly-report"), func(ctx context.Context) error {
		// ctx ends if the session holding the lock is lost.
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("done")
}

func ExampleProvider_Semaphore() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("DISTLOCK_MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locks, err := mysqllock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	h, err := locks.Semaphore("exports", 3).Acquire(ctx) // at most 3 exports at once
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	fmt.Println("exporting under token", h.FencingToken())
}

// TestExamples runs the examples that need a server.
func TestExamples(t *testing.T) {
	locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN")
	for _, ex := range []func(){Example, ExampleProvider_Semaphore} {
		ex()
	}
}
