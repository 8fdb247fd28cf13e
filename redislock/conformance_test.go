package redislock

import (
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// conformance drives the shared suite: every Provider is a new client, as a
// second process would have, with a 2 s TTL so abandoned grants free fast.
var conformance = locktest.Config{
	New: func(t testing.TB) core.Provider { return newProvider(t) },
	Observed: func(t testing.TB, o core.Observer) core.Provider {
		return newProvider(t, WithObserver(o))
	},
	Break: func(t testing.TB, h core.Handle) {
		breakHandle(t, h)
	},
	LostWithin:    testTTL,
	AbandonWithin: testTTL,
}

func TestConformance(t *testing.T) {
	locktest.TestProvider(t, conformance)
}

func BenchmarkConformance(b *testing.B) {
	locktest.BenchmarkProvider(b, conformance)
}
