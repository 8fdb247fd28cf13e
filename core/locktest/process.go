package locktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// Environment of the child process the abandonment cases start.
const (
	envChild = "DISTLOCK_LOCKTEST_CHILD" // the t.Name() of the TestProvider call to act in
	envName  = "DISTLOCK_LOCKTEST_NAME"  // the lock to take
	envKind  = "DISTLOCK_LOCKTEST_KIND"  // mutex, read, write or semaphore
	envMode  = "DISTLOCK_LOCKTEST_MODE"  // exit or hang
	heldLine = "LOCKTEST-HELD"
)

func lockerOf(p core.Provider, kind, name string) core.Locker {
	switch kind {
	case "read":
		return p.RWMutex(name).RLocker()
	case "write":
		return p.RWMutex(name)
	case "semaphore":
		return p.Semaphore(name, 1)
	default:
		return p.Mutex(name)
	}
}

// childMode reports whether this process is an abandonment child. In the
// child, the one TestProvider call the parent named takes the lock, says so
// on stdout and then dies without releasing; every other call returns at
// once.
func childMode(t *testing.T, cfg Config) bool {
	want := os.Getenv(envChild)
	if want == "" {
		return false
	}
	if t.Name() != want {
		return true
	}
	p := cfg.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := lockerOf(p, os.Getenv(envKind), os.Getenv(envName)).Acquire(ctx)
	if err != nil {
		fmt.Printf("LOCKTEST-ERROR %v\n", err)
		os.Exit(3)
	}
	fmt.Printf("%s %d\n", heldLine, h.FencingToken())
	if os.Getenv(envMode) == "exit" {
		os.Exit(3) // no Release, no cleanup: the process just ends
	}
	select {} // hang until the parent kills us
}

func testAbandon(t *testing.T, s *suite) {
	for _, c := range []struct{ kind, mode string }{
		{"mutex", "exit"},
		{"mutex", "kill"},
		{"read", "kill"},
		{"write", "kill"},
		{"semaphore", "kill"},
	} {
		t.Run(c.kind+"_"+c.mode, func(t *testing.T) {
			check := lockerOf(s.p1, c.kind, s.name("probe"))
			if h, err := check.TryAcquire(bg()); errors.Is(err, core.ErrUnsupported) {
				t.Logf("%s is not supported by this backend: nothing to check", c.kind)
				return
			} else if err == nil {
				_ = h.Release(bg())
			}
			name := s.name("abandon-" + c.kind + "-" + c.mode)
			runChild(t, parentName(t), c.kind, c.mode, name)

			// The lock is free again within AbandonWithin. A writer is the
			// strictest check for every kind.
			kind := c.kind
			if kind == "read" {
				kind = "write"
			}
			ctx, cancel := context.WithTimeout(bg(), s.cfg.abandonWithin()+5*time.Second)
			defer cancel()
			start := time.Now()
			h, err := lockerOf(s.p1, kind, name).Acquire(ctx)
			if err != nil {
				t.Fatalf("the lock a dead process held was not freed within %v: %v", s.cfg.abandonWithin()+5*time.Second, err)
			}
			t.Logf("freed %v after the child died", time.Since(start).Round(time.Millisecond))
			mustRelease(t, h)
		})
	}
}

// parentName returns the t.Name() of the TestProvider call that owns t.
func parentName(t *testing.T) string {
	parts := strings.Split(t.Name(), "/")
	// .../Abandon/<case>: the TestProvider call is two levels up.
	return strings.Join(parts[:len(parts)-2], "/")
}

// runChild re-runs the test binary so that the TestProvider call named
// owner takes the lock in a separate process, and returns once that process
// has died holding it.
func runChild(t *testing.T, owner, kind, mode, name string) {
	t.Helper()
	parts := strings.Split(owner, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(bg(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+owner, envName+"="+name, envKind+"="+kind, envMode+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	held := false
	var seen []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, heldLine) {
			held = true
			break
		}
		seen = append(seen, line)
	}
	if !held {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child process never took the lock; it printed:\n%s", strings.Join(seen, "\n"))
	}
	if mode == "kill" {
		_ = cmd.Process.Kill() // SIGKILL on Unix: no chance to clean up
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	_ = cmd.Wait()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func testLost(t *testing.T, s *suite) {
	if s.cfg.Break == nil {
		t.Skip("Config.Break is nil: this backend has no way to break a lock from outside")
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			if !s.supported(t, a) {
				return
			}
			name := s.name("lost-" + a.name)
			h := mustTry(t, a.make(s.p1, name))
			s.cfg.Break(t, h)
			if !waitDone(h.Context(), s.cfg.lostWithin()) {
				t.Fatalf("the handle's context was not done %v after the lock was broken", s.cfg.lostWithin())
			}
			if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrLockLost) {
				t.Fatalf("cause = %v, want an error matching ErrLockLost", cause)
			}
			// Releasing a lost handle is harmless, and the lock can be taken again.
			_ = h.Release(bg())
			if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrLockLost) {
				t.Fatalf("Release changed the cause of a lost handle to %v", cause)
			}
			mustRelease(t, mustAcquire(t, a.make(s.p2, name)))
		})
	}
}
