// Package redistest holds the test helpers that redislock and redisop
// share: the test server named by DISTLOCK_REDIS_ADDRS, clients closed with
// the test, unique key prefixes, and redis-servers of a test's own for the
// tests that kill or flush them.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core/locktest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Addr is the first server of DISTLOCK_REDIS_ADDRS; the test skips without
// it.
func Addr(t testing.TB) string {
	t.Helper()
	addrs := locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS")
	return strings.TrimSpace(strings.Split(addrs, ",")[0])
}

// Client returns a client of the server at addr, closed when the test ends.
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Prefix returns a key prefix no other run uses.
func Prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "distlock-test-" + hex.EncodeToString(b[:]) + ":"
}

// DeadAddr returns a loopback address nothing listens on.
func DeadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// Server is a redis-server a test starts and may kill: fault tests never
// touch the shared servers.
type Server struct {
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
}

// StartServer starts a redis-server without persistence on a free port and
// kills it when the test ends. The test skips when redis-server is not
// installed.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if err == nil {
			break
		}
		bin, err = exec.LookPath(dir + "/redis-server")
	}
	if err != nil {
		t.Skip("redis-server is not installed: run `make test` from the repository root, which installs it")
	}
	port, err := strconv.Atoi(DeadAddr(t)[len("127.0.0.1:"):])
	require.NoError(t, err)
	s := &Server{t: t, bin: bin, port: port}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server again after Kill, on the same port, empty.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	require.NoError(s.t, s.cmd.Start())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	require.Eventually(s.t, func() bool { return rdb.Ping(context.Background()).Err() == nil },
		10*time.Second, 10*time.Millisecond, "redis-server on %s did not come up", s.Addr())
}

// Kill kills the server and waits for it to exit; its data is lost.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
