package redislock

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownServer is a redis-server this test starts and may kill: fault tests
// never touch the shared servers.
type ownServer struct {
	t    *testing.T
	bin  string
	port int
	cmd  *exec.Cmd
}

func startOwnServer(t *testing.T, port int) *ownServer {
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
	s := &ownServer{t: t, bin: bin, port: port}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *ownServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *ownServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	require.NoError(s.t, s.cmd.Start())
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	require.Eventually(s.t, func() bool { return rdb.Ping(context.Background()).Err() == nil },
		10*time.Second, 10*time.Millisecond, "redis-server on %s did not come up", s.addr())
}

func (s *ownServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := strconv.Atoi(deadAddr(t)[len("127.0.0.1:"):])
	require.NoError(t, err)
	return port
}

func TestServerRestartUnderHolder(t *testing.T) {
	srv := startOwnServer(t, freePort(t))
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	p, err := New(rdb, WithTTL(testTTL))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	lockers := []core.Locker{p.Mutex("m"), p.RWMutex("rw"), p.RWMutex("r").RLocker(), p.Semaphore("s", 3)}
	var handles []core.Handle
	for _, l := range lockers {
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		handles = append(handles, h)
	}

	// The server dies with every grant (no persistence) and comes back.
	srv.kill()
	for _, h := range handles {
		// Renewals fail from now on: the handle is lost when its trust
		// window (start + TTL − margin) closes, within one TTL.
		waitDone(t, h.Context(), testTTL+time.Second)
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	}
	srv.start()

	for i, l := range lockers {
		// The driver reports the dial error it last saw until its
		// background re-dial succeeds (about a second).
		var h core.Handle
		require.Eventually(t, func() bool {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			h, err = l.Acquire(actx)
			return err == nil
		}, 15*time.Second, 50*time.Millisecond, "acquire again after the restart")
		assert.Greater(t, h.FencingToken(), handles[i].FencingToken(), "tokens keep increasing across a restart that lost the data")
		require.NoError(t, h.Release(ctx))
		require.NoError(t, handles[i].Release(ctx), "releasing the lost handle is harmless")
	}
}
