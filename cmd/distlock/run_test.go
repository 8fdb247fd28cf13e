package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/core/locktest"
)

// work is a CMD that appends "start NAME TOKEN" and "end NAME TOKEN" to
// the file in $OUT around a short pause, so that overlapping holders would
// interleave their lines.
const work = `echo "start $DISTLOCK_NAME $DISTLOCK_TOKEN" >> "$OUT"; sleep 0.05; echo "end $DISTLOCK_NAME $DISTLOCK_TOKEN" >> "$OUT"`

// Two processes looping on distlock run over one name never overlap, and
// the tokens CMD sees strictly increase.
func TestRunExclusive(t *testing.T) {
	for backend, url := range map[string]func(t *testing.T) string{
		"redis":    func(t *testing.T) string { return redisURL(t, unique(t)) },
		"postgres": func(t *testing.T) string { return pgURL(t, unique(t)) },
		"file":     fileURL,
	} {
		t.Run(backend, func(t *testing.T) {
			url, name := url(t), unique(t)
			out := filepath.Join(t.TempDir(), "out")
			t.Setenv("OUT", out)
			const rounds = 4
			loop := fmt.Sprintf(`for i in $(seq %d); do "$0" run -wait 1m "$1" "$2" -- sh -c '%s' || exit 1; done`, rounds, work)
			var loops []*osCmd
			for range 2 {
				cmd, _, stderr := distlockCmd(t)
				cmd.Path, cmd.Args = "/bin/sh", []string{"sh", "-c", loop, os.Args[0], url, name}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				loops = append(loops, &osCmd{cmd, stderr})
			}
			for _, l := range loops {
				if code := exitStatus(t, l.cmd, 2*time.Minute); code != 0 {
					t.Fatalf("a loop exited %d: %s", code, l.stderr)
				}
			}
			checkNoOverlap(t, out, name, 2*rounds)
		})
	}
}

// osCmd is a started process and its stderr.
type osCmd struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

// kill kills c's process group, as a dying host would, and reaps it.
func (c *osCmd) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// checkNoOverlap checks that out holds n start/end pairs of name, one
// after the other, with strictly increasing tokens.
func checkNoOverlap(t *testing.T, out, name string, n int) {
	t.Helper()
	lines := waitLines(t, out, 2*n, time.Second)
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		var tok, tok2 uint64
		var n1, n2 string
		if _, err := fmt.Sscanf(lines[i]+" "+lines[i+1], "start %s %d end %s %d", &n1, &tok, &n2, &tok2); err != nil || n1 != name || n2 != name || tok != tok2 {
			t.Fatalf("holders overlapped or the environment is wrong at line %d:\n%s", i, strings.Join(lines, "\n"))
		}
		if tok <= last {
			t.Fatalf("token %d after %d:\n%s", tok, last, strings.Join(lines, "\n"))
		}
		last = tok
	}
}

// -wait 0 on a held lock exits 75 at once with one line on stderr; a
// bounded wait does the same when it runs out.
func TestRunBusy(t *testing.T) {
	url, name := redisURL(t, unique(t)), unique(t)
	p, err := distlock.Open(bg(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.Mutex(name).TryAcquire(bg())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(bg())
	for _, wait := range []string{"0", "300ms"} {
		start := time.Now()
		code, stdout, stderr := runDistlock(t, "run", "-wait", wait, url, name, "--", "echo", "ran")
		if code != exitBusy || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not acquired within") {
			t.Errorf("-wait %s on a held lock: status %d, stdout %q, stderr %q; want %d, nothing, one line", wait, code, stdout, stderr, exitBusy)
		}
		t.Logf("-wait %s: exited after %v", wait, time.Since(start))
	}
}

// A lock lost while CMD runs stops CMD within the backend's bound and
// exits 76.
func TestRunLost(t *testing.T) {
	for _, c := range []struct {
		backend string
		url     func(t *testing.T, tag string) string
		breakIt func(t *testing.T, tag string)
		bound   time.Duration // the backend's documented bound, plus room for a loaded machine
	}{
		{"redis", redisURL, deleteKeys, 2*time.Second + 3*time.Second},
		{"postgres", pgURL, terminateSessions, 2*500*time.Millisecond + 3*time.Second},
	} {
		t.Run(c.backend, func(t *testing.T) {
			tag, out := unique(t), filepath.Join(t.TempDir(), "out")
			t.Setenv("OUT", out)
			cmd, _, stderr := distlockCmd(t, "run", "-grace", "1s", c.url(t, tag), unique(t), "--",
				"sh", "-c", `echo started >> "$OUT"; exec sleep 60`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitLines(t, out, 1, 30*time.Second)
			c.breakIt(t, tag)
			start := time.Now()
			if code := exitStatus(t, cmd, c.bound); code != exitLost {
				t.Fatalf("status %d, want %d; stderr %q", code, exitLost, stderr)
			}
			t.Logf("stopped %v after the break: %s", time.Since(start), stderr)
			if !strings.Contains(stderr.String(), "lost the lock") {
				t.Fatalf("stderr %q does not say the lock was lost", stderr)
			}
		})
	}
}

// deleteKeys deletes every key under the prefix tag, as an operator would.
func deleteKeys(t *testing.T, tag string) {
	addr := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")[0]
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	keys, err := rdb.Keys(bg(), tag+":*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys under %s: %v, %v", tag, keys, err)
	}
	if err := rdb.Del(bg(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// terminateSessions ends every session named tag (application_name).
func terminateSessions(t *testing.T, tag string) {
	conn, err := pgx.Connect(bg(), locktest.RequireEnv(t, "DISTLOCK_PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg())
	var n int
	err = conn.QueryRow(bg(), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", tag).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminated %d sessions of %s: %v", n, tag, err)
	}
}

// SIGTERM to distlock reaches CMD, whose status distlock exits with.
func TestRunForwardsSignal(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("OUT", out)
	cmd, _, stderr := distlockCmd(t, "run", fileURL(t), "sig", "--",
		"sh", "-c", `trap 'exit 9' TERM; echo ready >> "$OUT"; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLines(t, out, 1, 30*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, cmd, 30*time.Second); code != 9 {
		t.Fatalf("status %d, want CMD's 9; stderr %q", code, stderr)
	}
}

// The leader runs CMD; killed with its CMD, as a dead host, it hands over
// to the other candidate within the TTL, with a larger term. holder and
// members show the candidates; SIGTERM to the new leader ends its CMD and
// distlock with CMD's status.
func TestLeaderHandover(t *testing.T) {
	url, group := redisURL(t, unique(t)), unique(t)
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("OUT", out)
	cmds := map[string]*osCmd{}
	for _, id := range []string{"a", "b"} {
		cmd, _, stderr := distlockCmd(t, "leader", "-id", id, "-grace", "1s", url, group, "--",
			"sh", "-c", `echo "$DISTLOCK_ID $DISTLOCK_TOKEN $DISTLOCK_NAME" >> "$OUT"; exec sleep 60`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[id] = &osCmd{cmd, stderr}
	}
	first := strings.Fields(waitLines(t, out, 1, 30*time.Second)[0])
	if len(first) != 3 || first[2] != group {
		t.Fatalf("CMD's environment: %q", first)
	}
	leader, token := first[0], first[1]
	other := map[string]string{"a": "b", "b": "a"}[leader]

	if code, stdout, stderr := runDistlock(t, "holder", url, group); code != 0 || stdout != fmt.Sprintf("%s is held by %s (token %s)\n", group, leader, token) {
		t.Errorf("holder: %d %q %q", code, stdout, stderr)
	}
	var members string
	waitFor(t, 30*time.Second, func() bool {
		_, members, _ = runDistlock(t, "members", url, group)
		return members == "a\nb\n"
	}, func() string { return fmt.Sprintf("members lists %q, want a and b", members) })

	cmds[leader].kill()
	second := strings.Fields(waitLines(t, out, 2, 2*time.Second+10*time.Second)[1])
	if second[0] != other {
		t.Fatalf("after %s died, %s leads, want %s", leader, second[0], other)
	}
	if a, b := atoi(t, token), atoi(t, second[1]); b <= a {
		t.Fatalf("term %d after term %d", b, a)
	}
	if err := cmds[other].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, cmds[other].cmd, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("the new leader exited %d after SIGTERM, want CMD's %d; stderr %s", code, 128+int(syscall.SIGTERM), cmds[other].stderr)
	}
}

func atoi(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// holder on a backend that cannot tell says so.
func TestHolderUnsupported(t *testing.T) {
	code, _, stderr := runDistlock(t, "holder", pgURL(t, "x"), "n")
	if code != exitError || !strings.Contains(stderr, "fence_table") {
		t.Fatalf("holder on postgres: %d %q", code, stderr)
	}
}

// holder on redlock:// names the grant a majority of the servers hold.
func TestHolderRedLock(t *testing.T) {
	addrs := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")
	url := "redlock://" + strings.Join(addrs[:3], ",") + "?restart_guard=0s&identity=cli-holder"
	name := unique(t)
	if code, stdout, stderr := runDistlock(t, "holder", url, name); code != 0 || stdout != name+" is free\n" {
		t.Fatalf("holder of a free lock: %d %q %q", code, stdout, stderr)
	}
	p, err := distlock.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.Mutex(name).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(t.Context())
	want := fmt.Sprintf("%s is held by cli-holder (token %d)\n", name, h.FencingToken())
	if code, stdout, stderr := runDistlock(t, "holder", url, name); code != 0 || stdout != want {
		t.Fatalf("holder: %d %q %q, want %q", code, stdout, stderr, want)
	}
}
