package torture

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/tests/internal/launch"
)

// TestTortureSentinel: redislock with replica acknowledgment on a master,
// its replica and three Sentinels; the master is killed and the Sentinels
// promote the replica. Only grants the replica acknowledged are handed
// out, and those are on the promoted replica, so no critical sections
// overlap and no write is refused (tokens never went back). The TTL is
// well above a failover (about 2.5 s), so a holder's renewals reach the
// promoted replica in time.
func TestTortureSentinel(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	s := launch.Sentinel(t)
	b := backend{kind: "sentinel", addr: strings.Join(s.Sentinels, ","), ttl: 10 * time.Second}
	// failover kills the master and, once the replica is promoted, brings
	// the old master back as its replica: until then no grant can be
	// acknowledged, so nobody gets the lock.
	failover := func(t *testing.T, old launch.Server) {
		old.Kill(t)
		s.WaitFailover(t, old, time.Minute)
		s.Rejoin(t, old, time.Minute)
	}
	underHolder := fault{name: "master SIGKILL under a holder", ordered: true, inject: func(t *testing.T, r *run) {
		r.holding(0, time.Hour)
		failover(t, s.Master(t, 30*time.Second))
		r.release(0) // its grant survived: its write is accepted
	}}
	// cut stops replication before worker 0's next grant and kills the
	// master, then holds worker 0 in that critical section once it has
	// one. Without replica acknowledgment worker 0 is granted the lock
	// during the cut, the promoted replica lacks it, and the others get it
	// while worker 0 holds: overlaps.
	cut := fault{name: "replica cut, master SIGKILL", ordered: true, inject: func(t *testing.T, r *run) {
		old := s.Master(t, 30*time.Second)
		replica := s.Servers[0]
		if replica == old {
			replica = s.Servers[1]
		}
		c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
		defer c.Close()
		if err := c.ReplicaOf(context.Background(), "127.0.0.1", "1").Err(); err != nil {
			t.Fatalf("cutting the replica: %v", err)
		}
		// A grant made before the cut enters its section within
		// milliseconds: the section held is one granted after the cut.
		time.Sleep(100 * time.Millisecond)
		entered := r.res.holdNext(0, time.Hour)
		// The cut lasts until worker 0 is granted the lock, which only a
		// grant nobody acknowledged can do, or for 2 s.
		select {
		case <-entered:
		case <-time.After(2 * time.Second):
		}
		failover(t, old)
		select {
		case <-entered:
		case <-time.After(sizes().within):
			t.Fatalf("worker 0 did not enter its critical section after the failover\n%s", r.output())
		}
		// Held while the others try, until one of them writes (which a
		// grant the promoted replica lacks would allow), or for a TTL and
		// 3 s: the replica kept the grant of the holder at the cut, which
		// nobody renews after the failover.
		start, _ := r.res.ops()
		deadline := time.After(b.ttl + 3*time.Second)
		for ops, changed := r.res.ops(); ops == start; ops, changed = r.res.ops() {
			select {
			case <-changed:
				continue
			case <-deadline:
			}
			break
		}
		r.release(0)
	}}
	torture(t, b, []fault{underHolder, cut})
}
