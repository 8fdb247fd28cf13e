// Command pglock takes and releases one mutex on the PostgreSQL server at
// $DATABASE_URL (default postgres://localhost/postgres). The release check
// (tests/cmd/release) builds it against the packed modules and requires that
// it pulls in no Redis or NATS driver.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("DATABASE_URL"), "postgres://localhost/postgres"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	p, err := pglock.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := lockOnce(ctx, p); err != nil {
		log.Fatal(err)
	}
}

func lockOnce(ctx context.Context, p core.Provider) error {
	h, err := p.Mutex("release-check").Acquire(ctx)
	if err != nil {
		return err
	}
	fmt.Println("pglock: fencing token", h.FencingToken())
	return h.Release(ctx)
}
