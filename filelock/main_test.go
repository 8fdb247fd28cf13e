package filelock

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// envDir names the directory the conformance suite's Providers share. The
// parent test process creates it; the child processes of the abandonment
// cases inherit it, so they lock the same files.
const envDir = "DISTLOCK_FILELOCK_DIR"

func TestMain(m *testing.M) {
	if os.Getenv(envDir) != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "distlock-filelock-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv(envDir, dir)
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
