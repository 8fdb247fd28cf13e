package mysqllock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

var conformance = locktest.Config{
	New:   func(t testing.TB) core.Provider { return newProvider(t) },
	Break: func(t testing.TB, h core.Handle) { kill(t, h) },
	Observed: func(t testing.TB, o core.Observer) core.Provider {
		return newProvider(t, WithObserver(o))
	},
	// A killed session is seen by the next keepalive ping.
	LostWithin: 2 * testKeepalive,
	// The server frees a dead process's locks when its connections close.
	AbandonWithin: 5 * time.Second,
}

func TestConformance(t *testing.T) {
	locktest.TestProvider(t, conformance)
}

// The same with tokens drawn from a table of counters.
func TestConformanceFenceTable(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider { return newProvider(t, WithFenceTable(DefaultFenceTable)) }
	locktest.TestProvider(t, cfg)
}

func BenchmarkConformance(b *testing.B) {
	locktest.BenchmarkProvider(b, conformance)
}

func BenchmarkConformanceFenceTable(b *testing.B) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider { return newProvider(t, WithFenceTable(DefaultFenceTable)) }
	locktest.BenchmarkProvider(b, cfg)
}
