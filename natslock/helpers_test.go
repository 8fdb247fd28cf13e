package natslock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core/locktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Tests share one bucket with a short TTL, so abandoned locks free fast; the
// conformance suite's child processes open the same bucket.
const (
	testBucket = "distlock_test"
	testTTL    = 2 * time.Second
	// testMemberMaxTTL is the members bucket's TTL: every test Provider
	// opens the same members bucket, whose TTL must match.
	testMemberMaxTTL = time.Minute
)

// connect opens a JetStream client on url, closed by t.Cleanup.
func connect(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// newProvider returns a Provider on the shared test server, closed by
// t.Cleanup.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	url := locktest.RequireEnv(t, "DISTLOCK_NATS_URL")
	return newProviderOn(t, connect(t, url), opts...)
}

func newProviderOn(t testing.TB, js jetstream.JetStream, opts ...Option) *Provider {
	t.Helper()
	p, err := New(js, append([]Option{WithBucket(testBucket), WithTTL(testTTL), WithMemberMaxTTL(testMemberMaxTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// lockName returns a name unique to this test run.
func lockName(t testing.TB) string {
	return fmt.Sprintf("%s/%08x", t.Name(), rand.Uint32())
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// server is a nats-server process of the test's own, on a free loopback
// port, for fault tests that must stop it.
type server struct {
	t    testing.TB
	port int
	dir  string
	bin  string
	cmd  *exec.Cmd
}

func startServer(t testing.TB) *server {
	t.Helper()
	// Run where the shared server runs (make test), which installs the binary.
	locktest.RequireEnv(t, "DISTLOCK_NATS_URL")
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	require.NoError(t, err, "nats-server binary")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	s := &server{t: t, port: port, dir: t.TempDir(), bin: bin}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-sd", filepath.Join(s.dir, "js"))
	var out strings.Builder
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	require.NoError(s.t, s.cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("nats-server did not start: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart starts the server again (after stop) on the same port and store.
func (s *server) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}
