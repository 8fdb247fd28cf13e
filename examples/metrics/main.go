// Command metrics runs locks and an election on the file backend and
// serves their Prometheus metrics on /metrics:
//
//	go run ./examples/metrics -addr 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep distlock_
//
// Four workers take turns on a mutex, three of them also on a semaphore of
// two; two
// candidates (each on its own Provider, as two processes would be) lead
// an election in turn, the leader resigning after a few seconds, so the
// leader gauge of this process's candidate flips. Ctrl-C stops it; -for
// stops it after a while.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
	distprom "github.com/distlock/distlock/observe/prometheus"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "where to serve /metrics")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "distlock-metrics-example"), "directory of the lock files")
	runFor := flag.Duration("for", 0, "stop after this long (0: at Ctrl-C)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, log, *addr, *dir); err != nil {
		log.Error("metrics example failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, addr, dir string) error {
	locks := distprom.NewLocks()
	elections := distprom.NewElections()
	registry := prometheus.NewRegistry()
	registry.MustRegister(locks, elections)

	p, err := filelock.New(dir, filelock.WithObserver(locks), filelock.WithLogger(log), filelock.WithIdentity("example"))
	if err != nil {
		return err
	}
	defer p.Close()
	rival, err := filelock.New(dir, filelock.WithIdentity("rival"))
	if err != nil {
		return err
	}
	defer rival.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	log.Info("serving", "url", "http://"+ln.Addr().String()+"/metrics")

	var wg sync.WaitGroup
	goWith := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	goWith(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
		}
	})
	for i := range 4 {
		goWith(func() { work(ctx, p.Mutex("jobs"), p.Semaphore("slots", 2), i) })
	}
	goWith(func() { campaign(ctx, log, p.Mutex("example-leader"), "example", elections) })
	goWith(func() { campaign(ctx, log, rival.Mutex("example-leader"), "rival", nil) })

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	return nil
}

// work takes the mutex and, for workers 0 to 2, a semaphore slot without
// waiting, holding each a few milliseconds, until ctx ends.
func work(ctx context.Context, mutex, slots core.Locker, i int) {
	for ctx.Err() == nil {
		hold(ctx, mutex.Acquire, 5*time.Millisecond)
		if i < 3 { // three workers for two slots: some tries find them busy
			hold(ctx, slots.TryAcquire, 20*time.Millisecond)
		}
		sleep(ctx, time.Duration(rand.IntN(20))*time.Millisecond)
	}
}

func hold(ctx context.Context, acquire func(context.Context) (core.Handle, error), d time.Duration) {
	h, err := acquire(ctx)
	if err != nil {
		return // busy, or ctx ended: counted by outcome
	}
	sleep(h.Context(), d)
	_ = h.Release(context.WithoutCancel(ctx))
}

// campaign runs a candidate that resigns after leading for two seconds.
// m, when not nil, gets its metrics.
func campaign(ctx context.Context, log *slog.Logger, l core.Locker, id string, m *distprom.Elections) {
	var e *election.Election
	cfg := election.Config{
		ID:          id,
		Logger:      log,
		ResignDelay: time.Second,
		OnPromote: func(ctx context.Context, term uint64) {
			sleep(ctx, 2*time.Second)
			_ = e.Resign(ctx) // from OnPromote: ends the term and returns
		},
	}
	if m != nil {
		cfg.Metrics = m
	}
	e, err := election.New(l, cfg)
	if err != nil {
		log.Error("election", "err", err)
		return
	}
	_ = e.Run(ctx)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
