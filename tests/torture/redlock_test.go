package torture

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redlock"
	"github.com/distlock/distlock/tests/internal/launch"
)

func TestTortureRedLock(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	// AOF: RedLock's fencing counters must survive a server crash.
	var srvs []launch.Server
	var addrs []string
	for range 3 {
		s := launch.Redis(t, launch.RedisConfig{AOF: true})
		srvs = append(srvs, s)
		addrs = append(addrs, s.Addr())
	}
	b := backend{kind: "redlock", addr: strings.Join(addrs, ","), ttl: ttl(), noSemaphore: true}
	minority := fault{name: "minority loss", overlaps: true, inject: func(t *testing.T, r *run) {
		srvs[0].Kill(t)
		// Progress, not throughput: with a server down each attempt also
		// waits for its error.
		r.progress(10, sizes().within, "while a minority of the servers was down")
		srvs[0].Start(t)
	}}
	// With a majority down nobody can hold the lock; worker 0, inside its
	// critical section when they went, outlives its lease and must be
	// fenced once the servers are back.
	majority := fault{name: "majority loss", overlaps: true, stale: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		srvs[0].Kill(t)
		srvs[1].Kill(t)
		time.Sleep(ttl() + ttl()/2) // the outage
		srvs[0].Start(t)
		srvs[1].Start(t)
		r.progress(3, sizes().within, "after the majority came back")
		r.release(0)
	}}
	torture(t, b, []fault{
		workerPause(true),
		workerKill,
		minority,
		majority,
	})
}

// TestTortureRedLockRestarts: RedLock over 3 servers without persistence,
// restarted empty under a holder, as a rolling restart does and in
// Kleppmann's case. The young-server guard keeps a restarted server from
// counting for a TTL, so nobody else gets a majority while the holder
// holds: no overlaps; and the tokens, floored by the servers' clocks where
// counters were lost, never go back: no write refused. The holder is let go
// within its TTL, so that its lease cannot end on its own meanwhile.
func TestTortureRedLockRestarts(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	var srvs []launch.Server
	var addrs []string
	for range 3 {
		s := launch.Redis(t, launch.RedisConfig{})
		markOld(t, s)
		srvs = append(srvs, s)
		addrs = append(addrs, s.Addr())
	}
	b := backend{kind: "redlock", addr: strings.Join(addrs, ","), ttl: ttl(), noSemaphore: true}
	restart := func(t *testing.T, s launch.Server) {
		s.Kill(t)
		s.Start(t)
	}
	rolling := fault{name: "rolling restart (no AOF)", ordered: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		restart(t, srvs[0])
		time.Sleep(300 * time.Millisecond) // the operator's pause between two restarts
		restart(t, srvs[1])
		time.Sleep(ttl() / 2) // held: the others try meanwhile
		r.release(0)
	}}
	kleppmann := fault{name: "Kleppmann (no AOF)", ordered: true, inject: func(t *testing.T, r *run) {
		srvs[2].Kill(t)
		r.holding(0, time.Hour) // granted by servers 0 and 1 alone
		srvs[2].Start(t)        // back empty
		restart(t, srvs[1])     // one of the holder's two
		time.Sleep(ttl() / 2)   // held: the others try meanwhile
		r.release(0)
	}}
	torture(t, b, []fault{rolling, kleppmann})
}

// markOld marks the fresh data set of s old for the young-server guard, so
// that it covers only the restarts the test makes.
func markOld(t *testing.T, s launch.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.Set(context.Background(), redlock.DefaultPrefix+"boot", 0, 0).Err(); err != nil {
		t.Fatalf("marking %s old: %v", s.Addr(), err)
	}
}
