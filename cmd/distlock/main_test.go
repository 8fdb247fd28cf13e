package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/core/locktest"
)

// envMain makes the test binary act as distlock: the tests run it as the
// command, in processes of its own.
const envMain = "DISTLOCK_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Exit(runCLI(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// distlockCmd returns the command distlock args, in a process group of its
// own so that a test can kill it with its CMD, as a host that dies would.
func distlockCmd(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd, &stdout, &stderr
}

// runDistlock runs distlock args to the end and returns its exit status and
// output.
func runDistlock(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd, stdout, stderr := distlockCmd(t, args...)
	if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("distlock %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// exitStatus waits for cmd, started, to exit within d and returns its
// status.
func exitStatus(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(d):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("distlock did not exit within %v", d)
		return 0
	}
}

// waitFor waits up to d for done to hold, failing the test with what
// otherwise.
func waitFor(t *testing.T, d time.Duration, done func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLines waits up to d for file to hold at least n lines and returns
// them.
func waitLines(t *testing.T, file string, n int, d time.Duration) []string {
	t.Helper()
	var lines []string
	waitFor(t, d, func() bool {
		b, _ := os.ReadFile(file)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(b) > 0 && len(lines) >= n
	}, func() string { return fmt.Sprintf("%s holds %q, want %d lines", file, lines, n) })
	return lines
}

// unique returns a name no other test or run uses.
func unique(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "cli-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b[:])
}

// redisURL is the first test Redis with a short TTL and a key prefix of
// the test's own.
func redisURL(t *testing.T, prefix string) string {
	addr := strings.Split(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")[0]
	return "redis://" + addr + "/0?ttl=2s&prefix=" + prefix + ":"
}

// pgURL is the test PostgreSQL with a short keepalive, its connections
// named app.
func pgURL(t *testing.T, app string) string {
	url := locktest.RequireEnv(t, "DISTLOCK_PG_URL")
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "keepalive=500ms&application_name=" + app
}

func fileURL(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) }

func bg() context.Context { return context.Background() }

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, exitUsage, "Usage:"},
		{[]string{"lock"}, exitUsage, `unknown command "lock"`},
		{[]string{"-h"}, 0, "Examples:"},
		{[]string{"run", "-h"}, 0, "-wait"},
		{[]string{"run", "file:///tmp"}, exitUsage, "want 2 arguments"},
		{[]string{"run", "file:///tmp", "n"}, exitUsage, "no command to run"},
		{[]string{"run", "-shared", "-semaphore", "2", "file:///tmp", "n", "--", "true"}, exitUsage, "give one"},
		{[]string{"run", "-wait", "soon", "file:///tmp", "n", "--", "true"}, exitUsage, "forever"},
		{[]string{"run", "zookeeper://h", "n", "--", "true"}, exitUsage, "scheme: unknown scheme"},
		{[]string{"run", "redis://h?ttl=x", "n", "--", "true"}, exitUsage, "parameter ttl"},
		{[]string{"run", "file:///tmp/x", "", "--", "true"}, exitUsage, "invalid lock name"},
		{[]string{"leader", "file:///tmp/x", "", "--", "true"}, exitUsage, "invalid lock name"},
		{[]string{"holder", "file:///tmp", "n", "extra"}, exitUsage, "unexpected arguments"},
		{[]string{"version"}, 0, "distlock "},
	} {
		code, stdout, stderr := runDistlock(t, c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.out) {
			t.Errorf("distlock %q: status %d, output %q; want %d and %q", c.args, code, stdout+stderr, c.code, c.out)
		}
	}
}

// CMD's exit status passes through; a CMD that cannot start is 126 or 127.
func TestRunExitStatus(t *testing.T) {
	url := fileURL(t)
	for cmd, want := range map[string]int{
		"exit 0": 0, "exit 7": 7, "kill -TERM $$": 128 + int(syscall.SIGTERM),
	} {
		if code, _, stderr := runDistlock(t, "run", url, "status", "--", "sh", "-c", cmd); code != want {
			t.Errorf("CMD %q: status %d, want %d (stderr %q)", cmd, code, want, stderr)
		}
	}
	if code, _, _ := runDistlock(t, "run", url, "status", "--", "/no/such/command"); code != exitNotFound {
		t.Errorf("a missing CMD: status %d, want %d", code, exitNotFound)
	}
}
