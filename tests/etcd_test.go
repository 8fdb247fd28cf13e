package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/etcdlock"
)

// etcd as the election and polllease tests use it: a Provider on a new
// client per candidate or instance, with the tests' lease TTL.

func etcdElectionLocker(t testing.TB, name string) core.Locker {
	return etcdLockerAt(t, locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS"), name)
}

func etcdLockerAt(t testing.TB, endpoints, name string) core.Locker {
	p, closeP := etcdProvider(t, endpoints, electionTTL)
	t.Cleanup(closeP)
	return p.Mutex(name)
}

// etcdProvider opens a client on endpoints (comma-separated) and a
// Provider with ttl on it; the func closes both. Calls to a server that
// stopped answering fail within a second.
func etcdProvider(t testing.TB, endpoints string, ttl time.Duration) (*etcdlock.Provider, func()) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","),
		DialTimeout: time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	p, err := etcdlock.New(cli, etcdlock.WithPrefix("distlock-tests/"), etcdlock.WithTTL(ttl), etcdlock.WithTimeout(time.Second))
	require.NoError(t, err)
	return p, func() {
		_ = p.Close()
		_ = cli.Close()
	}
}

func etcdPollLease(t *testing.T) func(t testing.TB) (core.Provider, core.Membership, func()) {
	endpoints := locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS")
	return func(t testing.TB) (core.Provider, core.Membership, func()) {
		p, closeP := etcdProvider(t, endpoints, plTTL)
		return p, p, closeP
	}
}
