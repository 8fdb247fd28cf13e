package etcdlock

import (
	"bytes"
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

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/locktest"
)

// server is an etcd member of the test's own, on free loopback ports with
// its own data directory, for fault tests that must stop, freeze or
// restart it.
type server struct {
	t          testing.TB
	bin        string
	dir        string
	name       string
	cluster    string // the initial cluster: "name=peer URL,..."
	port, peer int
	cmd        *exec.Cmd
	out        strings.Builder
}

// startServer starts a single member.
func startServer(t testing.TB) *server {
	t.Helper()
	s := startCluster(t, 1)[0]
	return s
}

// startCluster starts a cluster of n members and returns once each serves
// requests.
func startCluster(t testing.TB, n int) []*server {
	t.Helper()
	// Run where the shared server runs (make test), which installs etcd.
	locktest.RequireEnv(t, "DISTLOCK_ETCD_ENDPOINTS")
	bin := locktest.RequireBinary(t, "etcd")
	ss := make([]*server, n)
	peers := make([]string, n)
	for i := range ss {
		ss[i] = &server{t: t, bin: bin, dir: dataDir(t), name: fmt.Sprintf("m%d", i), port: freePort(t), peer: freePort(t)}
		peers[i] = fmt.Sprintf("%s=http://127.0.0.1:%d", ss[i].name, ss[i].peer)
	}
	for _, s := range ss {
		s.cluster = strings.Join(peers, ",")
		s.launch()
		t.Cleanup(s.stop)
	}
	for _, s := range ss {
		s.awaitReady()
	}
	return ss
}

// dataDir is a directory for a member's data that outlives its process
// for the test: in memory where /dev/shm is writable, as the shared
// server's (scripts/services.sh), since an fsync to disk on a loaded
// machine can take longer than an operation's timeout.
func dataDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "distlock-etcd-test.")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) endpoints() []string { return []string{fmt.Sprintf("127.0.0.1:%d", s.port)} }

// start starts the member again, after stop, on the same ports and data,
// and returns once it serves requests.
func (s *server) start() {
	s.t.Helper()
	s.launch()
	s.awaitReady()
}

func (s *server) launch() {
	s.t.Helper()
	client := fmt.Sprintf("http://127.0.0.1:%d", s.port)
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peer)
	s.cmd = exec.Command(s.bin, "--name", s.name, "--data-dir", filepath.Join(s.dir, "data"), "--logger", "zap",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", s.cluster)
	s.out.Reset()
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	require.NoError(s.t, s.cmd.Start())
}

// awaitReady waits until the member serves a write (which a grant needs,
// and a read does not); each try waits up to a second for the member.
func (s *server) awaitReady() {
	s.t.Helper()
	cli := connect(s.t, s.endpoints())
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Put(ctx, "health", s.name)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("etcd %s did not start: %v\n%s", s.name, err, s.out.String())
		}
	}
}

// stop kills the member, as a crash would.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// freeze stops the member's process (SIGSTOP) until thaw: it keeps its
// connections but answers nothing.
// freeze stops the server and returns once every thread of it has stopped:
// SIGSTOP is delivered to each thread as it is next scheduled, and a
// thread running on another CPU could otherwise still answer a request
// sent after the signal.
func (s *server) freeze() {
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGSTOP))
	pid := s.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd (pid %d) did not stop within 10s of SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of process pid is stopped (state
// T in /proc/pid/task/*/stat).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}
func (s *server) thaw() { require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGCONT)) }
