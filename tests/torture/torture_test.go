package torture

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/tests/internal/launch"
)

// fault is a fault injected into a running run.
type fault struct {
	name string
	// inject breaks something while the workers run, and repairs it.
	inject func(t *testing.T, r *run)
	// overlaps: the fault may end a holder's lock while it still runs, so
	// critical sections may overlap (and fencing must refuse the older
	// holder's write). Otherwise overlaps must not happen at all.
	overlaps bool
	// stale: the fault certainly makes a stale holder write, which the
	// resource must have refused.
	stale bool
	// ordered: no write may be refused. Without overlaps a refused write
	// is a holder whose token was below one the resource accepted before:
	// tokens went back.
	ordered bool
}

// params are the sizes of a run.
type params struct {
	workers int
	warmup  int           // writes before the first fault
	after   int           // writes required after each fault
	repeat  int           // times each fault is injected
	within  time.Duration // bound on the progress after a fault
}

func sizes() params {
	if *long {
		return params{workers: 6, warmup: 200, after: 200, repeat: 5, within: 2 * time.Minute}
	}
	return params{workers: 3, warmup: 100, after: 50, repeat: 1, within: time.Minute}
}

// ttl is the lease TTL of the lease backends.
func ttl() time.Duration {
	if *long {
		return 5 * time.Second
	}
	return 2 * time.Second
}

// locks are the kinds of lock a torture takes: the mutex, and in long mode
// also an RWMutex's write side and a semaphore of 1 (fencing must hold for
// every primitive).
func locks() []string {
	if *long {
		return []string{"mutex", "write", "semaphore"}
	}
	return []string{"mutex"}
}

// torture runs each fault against each kind of lock on b, with fresh
// workers and a fresh lock, checks the invariants and adds a row to the
// summary.
func torture(t *testing.T, b backend, faults []fault) {
	for _, lock := range locks() {
		if lock == "semaphore" && b.noSemaphore || lock == "write" && b.noRWMutex {
			continue
		}
		b.lock = lock
		if len(locks()) == 1 {
			tortureLock(t, b, faults)
			continue
		}
		t.Run(lock, func(t *testing.T) { tortureLock(t, b, faults) })
	}
}

func tortureLock(t *testing.T, b backend, faults []fault) {
	p := sizes()
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			r := startRun(t, b, p.workers)
			r.progress(p.warmup, p.within, "before the fault")
			for range p.repeat {
				f.inject(t, r)
				r.progress(p.after, p.within, "after "+f.name)
			}
			st := r.stop()
			results.add(b.name(), f.name, st)
			t.Logf("%s/%s: %d ops, %d overlaps (%d unfenced), %d stale refused, %d lost updates, %d reused tokens",
				b.name(), f.name, st.ops, st.overlaps, st.uncaught, st.stale(), st.lost, st.reused)
			for _, e := range st.examples {
				t.Log(e)
			}
			assert.Zero(t, st.lost, "lost updates")
			assert.Zero(t, st.reused, "fencing tokens granted twice")
			assert.Zero(t, st.uncaught, "overlaps the fencing check let through")
			if !f.overlaps {
				assert.Zero(t, st.overlaps, "overlapping critical sections")
			}
			if f.stale {
				assert.Positive(t, st.staleWrites, "the stale holder's write was not refused")
			}
			if f.ordered {
				assert.Zero(t, st.stale(), "writes refused: a holder's token was below an earlier one")
			}
		})
	}
}

// workerPause SIGSTOPs worker 0 inside its critical section and resumes it
// later, as a long GC pause would. On a lease backend the pause lasts until
// the others made progress, that is beyond the TTL, and the paused holder's
// write must be refused. Without leases the lock stays held: nobody may
// make progress during the pause.
func workerPause(lease bool) fault {
	return fault{name: "worker SIGSTOP", overlaps: lease, stale: lease, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		r.signal(0, syscall.SIGSTOP)
		if lease {
			r.progress(3, sizes().within, "while a holder was paused beyond its TTL")
		} else {
			before, _ := r.res.ops()
			time.Sleep(time.Second) // the pause
			after, _ := r.res.ops()
			assert.Equal(t, before, after, "writes while the holder was paused")
		}
		r.signal(0, syscall.SIGCONT)
		r.release(0)
	}}
}

// workerKill SIGKILLs a worker while it holds the lock; the lock must be
// freed (at once, or when the lease expires).
var workerKill = fault{name: "worker SIGKILL", inject: func(t *testing.T, r *run) {
	w := r.live()
	r.holding(w, time.Hour)
	r.killWorker(w)
}}

// serverRestart kills the backend's server while worker 0 is inside its
// critical section, starts it again, and lets worker 0 write only once the
// others made progress. Use it where a restart frees the lock (no
// persistence, or locks tied to connections): its write must be refused.
func serverRestart(srv launch.Server) fault {
	return fault{name: "server kill+restart", overlaps: true, stale: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		srv.Kill(t)
		srv.Start(t)
		r.progress(3, sizes().within, "after the server restart")
		r.release(0)
	}}
}

// serverRestartKeep kills and restarts a server that keeps its data (NATS
// JetStream, Redis with AOF): locks survive it, so nobody is held back.
func serverRestartKeep(srv launch.Server) fault {
	return fault{name: "server kill+restart", overlaps: true, inject: func(t *testing.T, r *run) {
		srv.Kill(t)
		srv.Start(t)
	}}
}

// serverPause SIGSTOPs the server for twice the TTL, while worker 0 is
// inside its critical section: its lease expires meanwhile.
func serverPause(srv launch.Server) fault {
	return fault{name: "server SIGSTOP > TTL", overlaps: true, stale: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		srv.Pause(t)
		time.Sleep(2*ttl() + ttl()/2) // the pause
		srv.Resume(t)
		r.progress(3, sizes().within, "after the server pause")
		r.release(0)
	}}
}

func TestTortureFile(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	torture(t, backend{kind: "file", addr: t.TempDir()}, []fault{
		workerPause(false),
		workerKill,
	})
}

func TestTortureRedis(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	srv := launch.Redis(t, launch.RedisConfig{})
	b := backend{kind: "redis", addr: srv.Addr(), ttl: ttl()}
	torture(t, b, []fault{
		workerPause(true),
		workerKill,
		serverRestart(srv),
		serverPause(srv),
	})
}

func TestTorturePostgres(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	srv := launch.Postgres(t)
	b := backend{kind: "postgres", addr: srv.Addr()}
	terminate := fault{name: "pg_terminate_backend", overlaps: true, stale: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, srv.Addr())
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`).Scan(&n))
		require.Positive(t, n, "no backend held an advisory lock")
		r.progress(3, sizes().within, "after pg_terminate_backend")
		r.release(0)
	}}
	torture(t, b, []fault{
		workerPause(false),
		workerKill,
		terminate,
		serverRestart(srv),
	})
}

func TestTortureNATS(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	srv := launch.NATS(t)
	b := backend{kind: "nats", addr: "nats://" + srv.Addr(), ttl: ttl()}
	torture(t, b, []fault{
		workerPause(true),
		workerKill,
		serverRestartKeep(srv),
	})
}

// TestTortureDetects runs the torture on locks that exclude nobody, to show
// that it sees what it claims to: overlaps, which increasing tokens still
// fence off, and lost updates when every holder gets the same token.
func TestTortureDetects(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	for _, c := range []struct {
		kind  string
		check func(t *testing.T, st stats)
	}{
		{"unlocked", func(t *testing.T, st stats) {
			assert.Positive(t, st.overlaps, "overlaps")
			assert.Positive(t, st.stale(), "stale writes refused")
			assert.Zero(t, st.uncaught, "overlaps let through")
			for _, e := range st.examples {
				t.Log(e)
			}
			assert.Zero(t, st.lost, "lost updates")
		}},
		{"unfenced", func(t *testing.T, st stats) {
			assert.Positive(t, st.reused, "reused tokens")
			assert.Positive(t, st.uncaught, "overlaps let through")
			assert.Positive(t, st.lost, "lost updates")
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			r := startRun(t, backend{kind: c.kind}, 3)
			// One sure overlap, whatever the machine's load: worker 0
			// stays in its critical section while the others, whom
			// nothing excludes, write.
			r.holding(0, time.Hour)
			r.progress(3, sizes().within, "while worker 0 holds a broken lock")
			r.release(0)
			r.progress(300, sizes().within, "on a broken lock")
			st := r.stop()
			t.Logf("%s: %d ops, %d overlaps (%d unfenced), %d stale refused, %d lost updates, %d reused tokens",
				c.kind, st.ops, st.overlaps, st.uncaught, st.stale(), st.lost, st.reused)
			c.check(t, st)
		})
	}
}
