package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const startTimeout = 30 * time.Second

// proc is a server process run from a local binary: redis-server or
// nats-server, in its own process group.
type proc struct {
	name  string
	bin   string
	args  func(port int) []string
	ready func(addr string) error
	port  int
	cmd   *exec.Cmd
	done  chan struct{}
	// everUp is set once the server has run: from then on clients know its
	// address, so a restart must keep the port.
	everUp bool
}

func (p *proc) Addr() string { return hostPort(p.port) }

func (p *proc) Start(t testing.TB) {
	t.Helper()
	if p.cmd != nil {
		t.Fatalf("launch: %s on %s is already running", p.name, p.Addr())
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if p.port == 0 || attempt > 0 && !p.everUp {
			p.port = freePort(t)
		}
		cmd := exec.Command(p.bin, p.args(p.port)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("launch: %s: %v", p.name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		last = waitUntil(startTimeout, func() error {
			select {
			case <-done:
				return fmt.Errorf("exited: %s", out.String())
			default:
			}
			return p.ready(p.Addr())
		})
		if last == nil {
			p.cmd, p.done, p.everUp = cmd, done, true
			return
		}
		_ = cmd.Process.Kill()
		<-done
	}
	t.Fatalf("launch: %s did not start on %s: %v", p.name, p.Addr(), last)
}

func (p *proc) Kill(t testing.TB) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	<-p.done
	p.cmd = nil
}

func (p *proc) Pause(t testing.TB) {
	t.Helper()
	if p.cmd != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
	}
}

func (p *proc) Resume(t testing.TB) {
	t.Helper()
	if p.cmd != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	}
}

func localRedis(t testing.TB, cfg RedisConfig) Server {
	t.Helper()
	return newLocalRedis(t, cfg, nil)
}

// newLocalRedis starts redis-server for t with extra arguments after ours.
func newLocalRedis(t testing.TB, cfg RedisConfig, extra []string) *proc {
	t.Helper()
	bin, ok := findBinary("redis-server")
	if !ok {
		missing(t, "redis-server")
	}
	dir := t.TempDir()
	p := &proc{name: "redis-server", bin: bin, ready: redisPing, args: func(port int) []string {
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--daemonize", "no", "--loglevel", "warning"}
		if cfg.AOF {
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			args = append(args, "--appendonly", "no")
		}
		return append(args, extra...)
	}}
	p.Start(t)
	t.Cleanup(func() { p.Kill(t) })
	return p
}

func localNATS(t testing.TB) Server {
	t.Helper()
	bin, ok := findBinary("nats-server")
	if !ok {
		missing(t, "nats-server")
	}
	dir := t.TempDir()
	p := &proc{name: "nats-server", bin: bin, ready: natsPing, args: func(port int) []string {
		return []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", dir}
	}}
	p.Start(t)
	t.Cleanup(func() { p.Kill(t) })
	return p
}

// pgCluster is a PostgreSQL cluster run with pg_ctl, as the postgres user
// when we are root (PostgreSQL refuses to run as root).
type pgCluster struct {
	bindir string
	dir    string // owned by the cluster's user; data/ and the socket live here
	user   string // "" when we run it as ourselves
	port   int
	up     bool
	everUp bool // as proc.everUp
}

func (c *pgCluster) Addr() string {
	return "postgres://distlock@" + hostPort(c.port) + "/distlock?sslmode=disable"
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// run runs a PostgreSQL program as the cluster's user.
func (c *pgCluster) run(prog string, args ...string) error {
	path := filepath.Join(c.bindir, prog)
	var cmd *exec.Cmd
	if c.user != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.user, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *pgCluster) Start(t testing.TB) {
	t.Helper()
	if c.up {
		t.Fatalf("launch: postgres on %d is already running", c.port)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if c.port == 0 || attempt > 0 && !c.everUp {
			c.port = freePort(t)
		}
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", c.port, c.dir)
		err = c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"),
			"-o", opts, "-w", "-t", strconv.Itoa(int(startTimeout/time.Second)), "start")
		if err == nil {
			c.up, c.everUp = true, true
			return
		}
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	}
	log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	t.Fatalf("launch: postgres did not start: %v\n%s", err, log)
}

func (c *pgCluster) Kill(t testing.TB) {
	t.Helper()
	if !c.up {
		return
	}
	c.Resume(t)
	if err := c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop"); err != nil {
		t.Errorf("launch: %v", err)
	}
	c.up = false
}

// signal sends sig to the postmaster and every process it started.
func (c *pgCluster) signal(sig syscall.Signal) {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return
	}
	pids := []int{pid}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		s, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ") ".
		fields := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if child, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				pids = append(pids, child)
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

func (c *pgCluster) Pause(t testing.TB)  { c.signal(syscall.SIGSTOP) }
func (c *pgCluster) Resume(t testing.TB) { c.signal(syscall.SIGCONT) }

func localPostgres(t testing.TB) Server {
	t.Helper()
	initdb, ok := findBinary("initdb")
	if !ok {
		missing(t, "PostgreSQL (initdb)")
	}
	if p, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = p
	}
	c := &pgCluster{bindir: filepath.Dir(initdb)}
	if _, err := os.Stat(filepath.Join(c.bindir, "pg_ctl")); err != nil {
		missing(t, "PostgreSQL (pg_ctl)")
	}
	// Not t.TempDir: the cluster's user must own it and reach it, and
	// TempDir's parents are private to us.
	dir, err := os.MkdirTemp("", "distlock-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		c.user = pgUser(t)
		u, err := user.Lookup(c.user)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.run("initdb", "-D", c.data(), "--auth=trust", "-U", "distlock", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		t.Fatalf("launch: %v", err)
	}
	// fsync off: a test cluster needs no durability against power loss,
	// and Kill's crash leaves the OS's page cache intact. Commits stay
	// synchronous (the default): fencing counters must survive a crash.
	conf := "\nfsync = off\nfull_page_writes = off\nmax_connections = 200\n"
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	c.Start(t)
	t.Cleanup(func() { c.Kill(t) })
	if err := c.run("psql", "-X", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "distlock",
		"-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE distlock"); err != nil {
		t.Fatalf("launch: %v", err)
	}
	return c
}

// pgUser returns the user a root process runs PostgreSQL as: postgres, or
// distlock-pg as scripts/services.sh creates it.
func pgUser(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"postgres", "distlock-pg"} {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", "distlock-pg").CombinedOutput()
	if err != nil {
		t.Fatalf("launch: PostgreSQL refuses to run as root and user distlock-pg could not be created: %v\n%s", err, out)
	}
	return "distlock-pg"
}
