package torture

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/tests/internal/launch"
)

// openEtcd opens a worker's Provider on the etcd member at addr
// (host:port). Requests to a member that stopped answering fail within a
// second.
func openEtcd(addr string, ttl time.Duration) (*opened, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
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
	srv := launch.Etcd(t)
	b := backend{kind: "etcd", addr: srv.Addr(), ttl: ttl()}
	torture(t, b, []fault{
		workerPause(true),
		workerKill,
		serverRestartKeep(srv),
		serverPause(srv),
	})
}
