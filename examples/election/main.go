// Command election runs one candidate of a leader election over any
// backend, named by a URL (distlock.Open; default: a directory of lock
// files, no server). Start several on the same URL: one leads, the others
// follow; kill the leader (even with kill -9) and another takes over, at
// once on files and within the lease TTL on a lease backend; press Ctrl-C
// and the leader resigns, handing over at once.
//
//	go run ./examples/election -id a &
//	go run ./examples/election -id b &
//	go run ./examples/election -id c
//
// Over NATS JetStream (a nats-server -js on localhost), with a 5 s lease:
//
//	go run ./examples/election -id a -url 'nats://127.0.0.1:4222?ttl=5s' &
//	go run ./examples/election -id b -url 'nats://127.0.0.1:4222?ttl=5s'
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/examples/internal/urls"
)

func main() {
	lockURL := flag.String("url", urls.Default("distlock-election-example"), "the backend, shared by the candidates (file://, redis://, nats://, postgres://, ...)")
	id := flag.String("id", kit.DefaultIdentity(), "this candidate's ID")
	name := flag.String("election", "example-leader", "the election's name")
	priority := flag.Int("priority", 0, "0 is the most preferred; higher waits longer before campaigning")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("id", *id)
	if err := run(log, *lockURL, *name, *id, *priority); err != nil {
		log.Error("election failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, lockURL, name, id string, priority int) error {
	// The Provider records id with the lock while this candidate leads, so
	// the followers' LeaderChanged events name it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	provider, err := urls.Open(ctx, lockURL, id)
	if err != nil {
		return err
	}
	defer provider.Close()

	e, err := election.New(provider.Mutex(name), election.Config{
		ID:        id,
		Priority:  priority,
		OnPromote: lead(log),
		OnDemote:  func() { log.Info("stepped down") },
		OnEvent: func(ev election.Event) {
			switch ev.Kind {
			case election.LeaderChanged:
				log.Info("new leader", "leader", ev.Leader)
			case election.Demoted:
				log.Info("term ended", "term", ev.Term, "why", ev.Err)
			case election.CampaignFailed, election.ReleaseFailed:
				log.Warn(ev.Kind.String(), "err", ev.Err)
			}
		},
	})
	if err != nil {
		return err
	}

	// Ctrl-C or SIGTERM ends Run's context: the leader's work stops, the
	// lock is released, and a follower takes over at once.
	log.Info("campaigning", "election", name, "url", urls.Redacted(lockURL))
	if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// lead returns the leader's work: it runs until leadership ends, stamping
// everything it does with the term, the fencing token a protected resource
// would check.
func lead(log *slog.Logger) func(ctx context.Context, term uint64) {
	return func(ctx context.Context, term uint64) {
		log.Info("leading", "term", term)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				log.Info("leadership ending", "term", term, "why", context.Cause(ctx))
				return
			case <-tick.C:
				log.Info("working as leader", "term", term)
			}
		}
	}
}
