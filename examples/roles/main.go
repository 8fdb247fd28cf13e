// Command roles runs several leader elections from one process, one per
// role, with election.RoleManager: each role has its own lock, so one
// process can lead some roles and follow others. Each process prefers some
// roles (-prefer): it campaigns for those at once and for the others only
// after a delay, so that two processes started together split the roles
// instead of one taking all. Kill one and the other takes its roles over.
//
//	go run ./examples/roles -id a -prefer scheduler &
//	go run ./examples/roles -id b -prefer cleanup,reports
//
// Any backend named by a URL works (-url; default: lock files, no server).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/examples/internal/urls"
)

func main() {
	lockURL := flag.String("url", urls.Default("distlock-roles-example"), "the backend, shared by the processes (file://, redis://, nats://, postgres://, ...)")
	id := flag.String("id", kit.DefaultIdentity(), "this process's ID")
	roles := flag.String("roles", "scheduler,cleanup,reports", "the roles, comma-separated")
	prefer := flag.String("prefer", "", "the roles this process campaigns for first, comma-separated")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("id", *id)
	if err := run(log, *lockURL, *id, split(*roles), split(*prefer)); err != nil {
		log.Error("roles failed", "err", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

func run(log *slog.Logger, lockURL, id string, roles, prefer []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	provider, err := urls.Open(ctx, lockURL, id)
	if err != nil {
		return err
	}
	defer provider.Close()

	m := election.NewRoleManager(func(ev election.RoleEvent) {
		switch ev.Kind {
		case election.Promoted:
			log.Info("leading", "role", ev.Role, "term", ev.Term)
		case election.Demoted:
			log.Info("stepped down", "role", ev.Role, "term", ev.Term, "why", ev.Err)
		case election.LeaderChanged:
			if ev.Leader != id {
				log.Info("following", "role", ev.Role, "leader", ev.Leader)
			}
		}
	})
	for _, role := range roles {
		priority := 1 // campaigns after the preferring process had its chance
		if slices.Contains(prefer, role) {
			priority = 0
		}
		_, err := m.Add(role, provider.Mutex("roles-example/"+role), election.Config{
			ID:        id,
			Priority:  priority,
			OnPromote: work(log, role),
		})
		if err != nil {
			return err
		}
	}
	log.Info("campaigning", "roles", roles, "prefer", prefer, "url", urls.Redacted(lockURL))
	// Ctrl-C or SIGTERM: every role this process leads is released, and the
	// other process takes it over at once.
	if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// work is a role's leader work: it runs until the role's term ends,
// stamping what it does with the term, the fencing token a protected
// resource would check.
func work(log *slog.Logger, role string) func(ctx context.Context, term uint64) {
	return func(ctx context.Context, term uint64) {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				log.Info("working", "role", role, "term", term)
			}
		}
	}
}
