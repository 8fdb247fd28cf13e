package redlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/redlock"
)

// sharedClients returns clients for the first n servers of
// DISTLOCK_REDIS_ADDRS (make test starts five).
func sharedClients(t testing.TB, n int) []redis.UniversalClient {
	t.Helper()
	addrs := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")
	if len(addrs) < n {
		t.Fatalf("DISTLOCK_REDIS_ADDRS has %d servers, this test needs %d (make test starts five)", len(addrs), n)
	}
	clients := make([]redis.UniversalClient, n)
	for i := range clients {
		c := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(addrs[i])})
		t.Cleanup(func() { _ = c.Close() })
		// The shared servers are fresh, not restarted: mark their data sets
		// old, so that the young-server guard does not hold every test up
		// for a TTL. Tests of the guard run servers of their own.
		require.NoError(t, c.Set(context.Background(), redlock.DefaultPrefix+"boot", 0, 0).Err())
		clients[i] = c
	}
	return clients
}

// redisProc is a redis-server the test launched itself, so it can kill and
// pause it without disturbing the shared servers.
type redisProc struct {
	addr string
	cmd  *exec.Cmd
}

func startRedis(t testing.TB) *redisProc {
	t.Helper()
	bin := locktest.RequireBinary(t, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	require.NoError(t, cmd.Start())
	rp := &redisProc{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(rp.kill)
	c := redis.NewClient(&redis.Options{Addr: rp.addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s did not start:\n%s", rp.addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rp
}

func (r *redisProc) kill() {
	if r.cmd.Process != nil && r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

func (r *redisProc) pause()  { _ = r.cmd.Process.Signal(syscall.SIGSTOP) }
func (r *redisProc) resume() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }

// ownServers launches n redis-servers and returns them with a client each.
// Clients fail fast so a dead server costs milliseconds, not the default
// retries.
func ownServers(t testing.TB, n int) ([]*redisProc, []redis.UniversalClient) {
	t.Helper()
	procs := make([]*redisProc, n)
	clients := make([]redis.UniversalClient, n)
	for i := range procs {
		procs[i] = startRedis(t)
		c := redis.NewClient(&redis.Options{Addr: procs[i].addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.Set(context.Background(), redlock.DefaultPrefix+"boot", 0, 0).Err()) // fresh, not restarted
		clients[i] = c
	}
	return procs, clients
}
