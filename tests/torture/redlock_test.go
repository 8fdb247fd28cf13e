package torture

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/tests/internal/launch"
)

func TestTortureRedLock(t *testing.T) {
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
