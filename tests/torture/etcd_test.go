package torture

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/tests/internal/launch"
)

// openEtcd opens a worker's Provider on the etcd members at addr
// (host:port, comma-separated). Requests to a member that stopped
// answering fail within a second, and the client drops a member that does
// not answer its keepalive pings (10 s, gRPC's least, + 2 s), as
// etcdlock.Open's does.
func openEtcd(addr string, ttl time.Duration) (*opened, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(addr, ","), DialTimeout: time.Second,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	p, err := etcdlock.New(cli, etcdlock.WithTTL(ttl), etcdlock.WithTimeout(time.Second))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &opened{p: p, close: func() { _ = p.Close(); _ = cli.Close() }}, nil
}

// An etcd member keeps its leases and revisions through a restart, so a
// restart frees no lock and tokens keep increasing; a frozen member
// (SIGSTOP beyond the TTL) makes the holder's trust window close first.
func TestTortureEtcd(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	srv := launch.Etcd(t)
	b := backend{kind: "etcd", addr: srv.Addr(), ttl: ttl()}
	torture(t, b, []fault{
		workerPause(true),
		workerKill,
		serverRestartKeep(srv),
		serverPause(srv),
	})
}

// A three-member cluster loses its leader, killed or frozen (as a
// partition would cut it off): the others elect a leader and the workers
// go on while it is away; then it comes back and rejoins.
func TestTortureEtcdCluster(t *testing.T) {
	t.Parallel() // each row runs its own servers and workers
	ms := launch.EtcdCluster(t, 3)
	addrs := make([]string, len(ms))
	for i, m := range ms {
		addrs[i] = m.Addr()
	}
	b := backend{kind: "etcd", addr: strings.Join(addrs, ","), ttl: ttl()}
	torture(t, b, []fault{
		leaderAway(ms, "leader kill+restart", launch.Server.Kill, launch.Server.Start),
		leaderAway(ms, "leader SIGSTOP", launch.Server.Pause, launch.Server.Resume),
	})
}

// leaderAway takes the cluster's leader away, requires progress while it
// is away, and brings it back. The leases of the workers may lapse while
// the others elect a leader, so a holder may lose its lock inside its
// critical section.
func leaderAway(ms []launch.Server, name string, away, back func(launch.Server, testing.TB)) fault {
	return fault{name: name, overlaps: true, inject: func(t *testing.T, r *run) {
		m := ms[etcdLeader(t, ms)]
		away(m, t)
		r.progress(sizes().after, sizes().within, "while the leader is away")
		back(m, t)
	}}
}

// etcdLeader returns the index of the cluster's leader among ms.
func etcdLeader(t *testing.T, ms []launch.Server) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ms[0].Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := make([]uint64, len(ms))
	var leader uint64
	for i, m := range ms {
		st, err := cli.Status(ctx, m.Addr())
		if err != nil {
			t.Fatalf("status of %s: %v", m.Addr(), err)
		}
		ids[i], leader = st.Header.MemberId, st.Leader
	}
	for i, id := range ids {
		if id == leader {
			return i
		}
	}
	t.Fatal("no member is the leader")
	return -1
}
