package locktest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// Config tells the suite how to drive a backend.
type Config struct {
	// New returns a Provider on the backend under test. Each call should
	// return a new Provider (a new client), as a second process would have;
	// all of them must see the same locks. The Provider is closed, if it
	// needs closing, through t.Cleanup.
	New func(t testing.TB) core.Provider
	// Break makes the backend lose the lock behind h, as an operator or a
	// fault would (delete the key, remove the lock file, terminate the
	// connection). When nil, the lost-handle case is skipped.
	Break func(t testing.TB, h core.Handle)
	// LostWithin bounds how long a broken handle may take to report the
	// loss. Default 10 s.
	LostWithin time.Duration
	// AbandonWithin bounds how long a lock held by a process that died
	// takes to become free (the lease TTL for lease backends). Default 10 s.
	AbandonWithin time.Duration
	// Observed returns a Provider like New that reports to o (the
	// backend's WithObserver). When nil, the observer case is not run.
	Observed func(t testing.TB, o core.Observer) core.Provider
}

func (c Config) lostWithin() time.Duration {
	if c.LostWithin > 0 {
		return c.LostWithin
	}
	return 10 * time.Second
}

func (c Config) abandonWithin() time.Duration {
	if c.AbandonWithin > 0 {
		return c.AbandonWithin
	}
	return 10 * time.Second
}

// RequireEnv returns the value of the environment variable key, which names
// a server the test needs. When it is unset the test is skipped with a
// message naming `make test`, except when CI=true or
// DISTLOCK_REQUIRE_SERVERS=1, where a missing server fails the test.
func RequireEnv(t testing.TB, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v != "" {
		return v
	}
	msg := key + " is not set: run `make test` from the repository root, which starts the servers and sets it"
	if os.Getenv("CI") == "true" || os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// RequireBinary returns the path of the executable name (a server the test
// launches itself, for fault tests). When it is not installed the test is
// skipped, or fails under CI=true or DISTLOCK_REQUIRE_SERVERS=1, as with
// RequireEnv.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := name + " is not installed: run `make test` from the repository root, which installs it"
	if os.Getenv("CI") == "true" || os.Getenv("DISTLOCK_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
