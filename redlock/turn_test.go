package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redlock"
)

// TestWaiterWaitsForItsTurn: a mutex waiter whose first try found the lock
// held does not try again until its turn is announced, where its
// Provider's subscriptions ran from before that try; where they were not
// running yet, it tries again at once after subscribing, since a release
// in between may have gone unheard. Either way the release's announcement
// grants it the lock.
func TestWaiterWaitsForItsTurn(t *testing.T) {
	clients := sharedClients(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, listening := range []bool{true, false} {
		t.Run(fmt.Sprint("listening=", listening), func(t *testing.T) {
			holder, p := newProvider(t, clients), newProvider(t, clients)
			name := uniqueName(t)
			h, err := holder.Mutex(name).TryAcquire(ctx)
			require.NoError(t, err)
			if listening {
				// A waiter of p for another lock held elsewhere keeps p's
				// subscriptions running.
				keepListening(t, ctx, holder, p)
			}
			skips := make(chan bool, 1)
			restore := redlock.OnWait(func(n string, skip bool) {
				if n == name {
					skips <- skip
				}
			})
			defer restore()
			got := make(chan core.Handle, 1)
			go func() {
				h, err := p.Mutex(name).Acquire(ctx)
				assert.NoError(t, err)
				got <- h
			}()
			select {
			case skip := <-skips:
				require.Equal(t, listening, skip, "skipped the try after subscribing")
			case <-ctx.Done():
				t.Fatal("the waiter did not wait")
			}
			require.NoError(t, h.Release(ctx))
			select {
			case h = <-got:
				require.NotNil(t, h)
				require.NoError(t, h.Release(ctx))
			case <-ctx.Done():
				t.Fatal("the waiter was not granted the lock")
			}
		})
	}
}

// keepListening has a waiter of p wait, until the test ends, for a lock
// that holder holds, and returns once p's subscriptions run.
func keepListening(t *testing.T, ctx context.Context, holder, p *redlock.Provider) {
	t.Helper()
	name := uniqueName(t) + "/other"
	h, err := holder.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if h, err := p.Mutex(name).Acquire(wctx); err == nil {
			_ = h.Release(context.Background())
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		_ = h.Release(context.Background())
	})
	require.Eventually(t, func() bool { return redlock.Listening(p) }, 10*time.Second, time.Millisecond)
}
