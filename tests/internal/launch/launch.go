package launch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a server a test owns. Its address never changes, through kills
// and restarts, so clients reconnect to it by themselves.
type Server interface {
	// Addr is where clients connect: host:port for Redis and NATS, a URL
	// for PostgreSQL (database distlock, user distlock, no password), a
	// go-sql-driver DSN for MySQL.
	Addr() string
	// Kill stops the server abruptly, as a crash would: SIGKILL for Redis,
	// NATS and MySQL, an immediate shutdown (SIGQUIT) for PostgreSQL. Its data
	// directory stays, so Start brings back whatever it had persisted.
	Kill(t testing.TB)
	// Start starts a killed server again, at the same address, and returns
	// once it accepts connections.
	Start(t testing.TB)
	// Pause freezes the server: it keeps its connections open but answers
	// nothing, as a stalled machine would (SIGSTOP, docker pause).
	Pause(t testing.TB)
	// Resume thaws a paused server.
	Resume(t testing.TB)
}

// RedisConfig configures a Redis server.
type RedisConfig struct {
	// AOF turns on the append-only file with fsync on every write, so keys
	// survive Kill: RedLock's fencing counters need it.
	AOF bool
}

// Redis starts a Redis server for t.
func Redis(t testing.TB, cfg RedisConfig) Server {
	t.Helper()
	if useDocker(t) {
		return dockerRedis(t, cfg)
	}
	return localRedis(t, cfg)
}

// Postgres starts a PostgreSQL cluster for t, with a database and a
// superuser both called distlock.
func Postgres(t testing.TB) Server {
	t.Helper()
	if useDocker(t) {
		return dockerPostgres(t)
	}
	return localPostgres(t)
}

// NATS starts a NATS server with JetStream (file storage, so streams and
// key-value buckets survive Kill) for t.
func NATS(t testing.TB) Server {
	t.Helper()
	if useDocker(t) {
		return dockerNATS(t)
	}
	return localNATS(t)
}

// Engine reports which engine runs the servers of this process: "docker"
// or "local".
func Engine() string {
	if dockerWanted() {
		return "docker"
	}
	return "local"
}

// useDocker reports whether the Docker engine runs the servers.
func useDocker(t testing.TB) bool {
	t.Helper()
	return dockerWanted()
}

func dockerWanted() bool {
	switch os.Getenv("DISTLOCK_LAUNCHER") {
	case "local":
		return false
	case "docker":
		return true
	}
	return dockerPing()
}

// dockerPing reports whether a Docker engine answers /_ping within a
// second, without testcontainers: its client would leave goroutines behind
// when there is no engine.
func dockerPing() bool {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	network, addr := "tcp", u.Host
	if u.Scheme == "unix" {
		network, addr = "unix", u.Path
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Second}
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// missing skips t, or fails it when servers are required.
func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " is not installed and no Docker engine answers: run `make test` from the repository root, which installs it"
	if os.Getenv("CI") == "true" || os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// findBinary looks name up in PATH, then where Debian keeps server binaries
// out of a user's PATH.
func findBinary(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	dirs := []string{os.Getenv("DISTLOCK_PG_BINDIR"), "/usr/sbin", "/usr/local/sbin"}
	pg, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(pg) - 1; i >= 0; i-- {
		dirs = append(dirs, pg[i])
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// freePort returns a loopback port nothing listens on now, below the
// kernel's ephemeral range: a port in that range can be taken by a client
// socket's local end between this check and the server's bind, or while a
// server that keeps its port is down for a restart. The server that gets
// it binds it a moment later; a start that loses that race is retried on a
// new port.
func freePort(t testing.TB) int {
	t.Helper()
	lo, hi := portRange()
	for range 100 {
		port := lo + rand.IntN(hi-lo)
		if l, err := net.Listen("tcp", hostPort(port)); err == nil {
			_ = l.Close()
			return port
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("launch: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// portRange is where freePort picks: from 20000 up to the ephemeral range
// (scripts/services.sh picks the shared servers' ports the same way).
func portRange() (lo, hi int) {
	lo, hi = 20000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if eph, err := strconv.Atoi(f[0]); err == nil && eph > lo+2000 && eph <= 45000 {
			hi = eph
		}
	}
	return lo, hi
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitUntil polls ready every 20 ms until it succeeds or the deadline
// passes; it returns the last error.
func waitUntil(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisPing checks that a Redis server answers PING at addr.
func redisPing(addr string) error {
	return lineCheck(addr, "PING\r\n", func(line string) bool { return strings.HasPrefix(line, "+PONG") })
}

// natsPing checks that a NATS server with JetStream greets at addr.
func natsPing(addr string) error {
	return lineCheck(addr, "", func(line string) bool {
		return strings.HasPrefix(line, "INFO") && strings.Contains(line, `"jetstream":true`)
	})
}

func lineCheck(addr, send string, ok func(string) bool) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if send != "" {
		if _, err := c.Write([]byte(send)); err != nil {
			return err
		}
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if line := string(buf[:n]); !ok(line) {
		return fmt.Errorf("unexpected greeting %q", line)
	}
	return nil
}
