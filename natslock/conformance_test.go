package natslock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

func conformance() locktest.Config {
	return locktest.Config{
		// Built from the environment alone: the abandonment cases run it in
		// a child process too.
		New: func(t testing.TB) core.Provider { return newProvider(t) },
		Observed: func(t testing.TB, o core.Observer) core.Provider {
			return newProvider(t, WithObserver(o))
		},
		// An operator deleting the key by hand.
		Break: func(t testing.TB, h core.Handle) {
			p := newProvider(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, p.kv.Delete(ctx, h.(*handle).key))
		},
		// Renewal runs every TTL/3 and finds the key gone.
		LostWithin: testTTL,
		// The bucket's TTL removes a dead holder's key; the waiter's retry
		// is capped by the holder's remaining TTL.
		AbandonWithin: testTTL + time.Second,
	}
}

func TestConformance(t *testing.T) { locktest.TestProvider(t, conformance()) }

func BenchmarkConformance(b *testing.B) { locktest.BenchmarkProvider(b, conformance()) }
