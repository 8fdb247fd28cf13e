package etcdlock

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
			cli := connect(t, endpoints(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cli.Delete(ctx, h.(*handle).key)
			require.NoError(t, err)
		},
		// The handle watches its key: the delete is heard at once.
		LostWithin: testTTL,
		// The server deletes a dead holder's keys when its lease expires,
		// one TTL (at least the server's minimum lease) after the last
		// keep-alive, and checks for expired leases every 500 ms; the
		// waiter hears the delete from its watch.
		AbandonWithin: testTTL + time.Second,
	}
}

func TestConformance(t *testing.T) { locktest.TestProvider(t, conformance()) }

func BenchmarkConformance(b *testing.B) { locktest.BenchmarkProvider(b, conformance()) }
