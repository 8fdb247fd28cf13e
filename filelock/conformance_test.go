package filelock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// conformance describes this backend to core/locktest. Every Provider it
// makes, in this process or in the suite's child processes, uses the same
// directory, found through the environment (see TestMain).
var conformance = locktest.Config{
	New: func(t testing.TB) core.Provider { return conformanceProvider(t) },
	Observed: func(t testing.TB, o core.Observer) core.Provider {
		return conformanceProvider(t, WithObserver(o))
	},
	// An operator deletes the lock file.
	Break: func(t testing.TB, h core.Handle) {
		if err := os.Remove(lockPath(h)); err != nil {
			t.Fatal(err)
		}
	},
}

func conformanceProvider(t testing.TB, opts ...Option) *Provider {
	p, err := New(filepath.Join(os.Getenv(envDir), "conformance"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestConformance(t *testing.T) {
	locktest.TestProvider(t, conformance)
}

func BenchmarkConformance(b *testing.B) {
	locktest.BenchmarkProvider(b, conformance)
}
