package memlock_test

import (
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/core/memlock"
)

// conformance shares one Store between every Provider of the suite, as a
// server is shared. A child process of the abandonment cases takes its lock
// in a Store of its own, which dies with it: the parent finds the lock free.
func conformance() locktest.Config {
	store := memlock.NewStore()
	newProvider := func(t testing.TB) *memlock.Provider {
		p, err := memlock.New(memlock.WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	return locktest.Config{
		New: func(t testing.TB) core.Provider { return newProvider(t) },
		Break: func(t testing.TB, h core.Handle) {
			if !newProvider(t).BreakHandle(h) {
				t.Fatal("BreakHandle: the handle holds nothing")
			}
		},
	}
}

func TestConformance(t *testing.T) { locktest.TestProvider(t, conformance()) }

func BenchmarkConformance(b *testing.B) { locktest.BenchmarkProvider(b, conformance()) }
