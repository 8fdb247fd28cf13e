package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// fenced is the resource of TestClusterLeaderKilled: it counts grants and
// finds the ones made while an earlier holder still held the lock, as far
// as its handle could tell, or with a token not above every earlier one.
type fenced struct {
	mu      sync.Mutex
	holder  core.Handle
	highest uint64
	grants  int
	bad     []string
}

func (f *fenced) enter(h core.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder != nil && core.Held(f.holder) {
		f.bad = append(f.bad, "granted while the previous holder still held the lock")
	}
	if h.FencingToken() <= f.highest {
		f.bad = append(f.bad, fmt.Sprintf("token %d after %d (the new grant held: %v)", h.FencingToken(), f.highest, core.Held(h)))
	}
	f.holder, f.highest = h, h.FencingToken()
	f.grants++
}

func (f *fenced) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grants
}

// A three-member cluster loses its leader while workers of two Providers
// take turns on a lock: the others elect a new one, the workers go on
// within resume, nobody is granted the lock while another holder's handle
// still holds it, and tokens keep increasing.
//
// A write in flight to the dying member has an unknown outcome: the new
// leader may commit it after the client gave up, leaving a key in line
// for nobody on a lease the Provider's other keys keep alive. Unless its
// Provider deletes it once the cluster answers again (orphans.go), every
// worker waits behind it for good.
func TestClusterLeaderKilled(t *testing.T) {
	testClusterLeaderLost(t, "killed", (*server).stop, 0)
}

// The same with the leader frozen (SIGSTOP) rather than killed, as a
// member cut off by a partition: it keeps its connections open but answers
// nothing, so the clients' requests and watches on them hear nothing until
// the clients' keepalive pings find it silent (connect sets them as Open
// does) and they move to the other members.
func TestClusterLeaderFrozen(t *testing.T) {
	testClusterLeaderLost(t, "frozen", (*server).freeze, testKeepAlive+testKeepAliveTimeout)
}

// testClusterLeaderLost runs workers on a three-member cluster, applies
// fault to its leader, and checks that grants resume within the bound
// below plus detect, the time the clients take to notice the fault.
func testClusterLeaderLost(t *testing.T, how string, fault func(*server), detect time.Duration) {
	ms := startCluster(t, 3)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.endpoints()...)
	}
	const ttl = 4 * time.Second
	// Grants resume within: the election (etcd's default election timeout
	// is 1 s, a few seconds on a loaded machine), one TTL for the keys of
	// a lease whose trust window closed meanwhile to expire (a new leader
	// gives every lease its full TTL again), a second for an orphan's
	// delete or a failed read to be tried again, and as much again for a
	// loaded 2-core machine.
	resume := detect + 2*ttl + 10*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := lockName(t)
	var res fenced
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		l := newProviderOn(t, connect(t, eps), WithTTL(ttl), WithTimeout(time.Second)).Mutex(name)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					h, err := l.Acquire(ctx)
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						continue // an election in progress: try again
					}
					res.enter(h)
					time.Sleep(time.Millisecond)
					_ = h.Release(ctx)
				}
			}()
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	progress := func(n int, within time.Duration, what string) {
		t.Helper()
		want := res.count() + n
		require.Eventually(t, func() bool { return res.count() >= want }, within, 10*time.Millisecond, what)
	}
	progress(50, time.Minute, "before the leader died")

	leader := leaderOf(t, ms)
	fault(ms[leader])
	at := time.Now()
	progress(50, resume, "after the leader was "+how)
	t.Logf("50 grants %v after the leader was %s", time.Since(at).Round(time.Millisecond), how)

	res.mu.Lock()
	defer res.mu.Unlock()
	assert.Empty(t, res.bad)
}

// leaderOf returns the index of the cluster's leader.
func leaderOf(t *testing.T, ms []*server) int {
	t.Helper()
	cli := connect(t, ms[0].endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, ms[0].endpoints()[0])
	require.NoError(t, err)
	for i, m := range ms {
		st2, err := cli.Status(ctx, m.endpoints()[0])
		require.NoError(t, err)
		if st2.Header.MemberId == st.Leader {
			return i
		}
	}
	t.Fatal("no member is the leader")
	return -1
}

// Workers of three Providers, each on a different member of the shared
// three-member cluster (make test starts it), take turns on a lock: a
// release on one member reaches the waiters on the others through their
// watches, nobody is granted the lock while another holder's handle still
// holds it, and tokens increase.
func TestClusterAcrossMembers(t *testing.T) {
	members := strings.Split(locktest.RequireEnv(t, "DISTLOCK_ETCD_CLUSTER_ENDPOINTS"), ",")
	require.Len(t, members, 3)
	ctx := ctxT(t, 2*time.Minute)
	name := lockName(t)
	const grants = 60
	var res fenced
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(members))
	for _, m := range members {
		l := newProviderOn(t, connect(t, []string{m})).Mutex(name)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for res.count() < grants {
					h, err := l.Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					res.enter(h)
					if err := h.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	assert.GreaterOrEqual(t, res.grants, grants)
	assert.Empty(t, res.bad)
}
