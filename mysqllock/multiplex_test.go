package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/require"
)

// 1,000 random acquire/release operations over 20 names, from several
// goroutines, with the fewest connections the Provider allows and a pool
// with just room for them: nothing deadlocks, no name is ever held twice.
func TestMultiplexRandomOps(t *testing.T) {
	db := newDB(t)
	db.SetMaxOpenConns(4)
	p := newProviderOn(t, db, WithMaxConns(2))
	names := make([]string, 20)
	for i := range names {
		names[i] = uniqueName(t, fmt.Sprint(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const workers, opsPerWorker = 5, 200
	var mu sync.Mutex
	holder := map[string]int{} // name → worker holding it
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []core.Handle
			var heldNames []string
			release := func(i int) error {
				mu.Lock()
				delete(holder, heldNames[i])
				mu.Unlock()
				err := held[i].Release(ctx)
				held = append(held[:i], held[i+1:]...)
				heldNames = append(heldNames[:i], heldNames[i+1:]...)
				return err
			}
			defer func() {
				for len(held) > 0 {
					_ = release(0)
				}
			}()
			for range opsPerWorker {
				if len(held) > 0 && (len(held) >= 3 || rand.IntN(2) == 0) {
					if err := release(rand.IntN(len(held))); err != nil {
						errs <- err
						return
					}
					continue
				}
				name := names[rand.IntN(len(names))]
				l := p.Mutex(name)
				var h core.Handle
				var err error
				if rand.IntN(2) == 0 {
					h, err = l.TryAcquire(ctx)
				} else {
					// A short wait, so that workers waiting on each other's
					// names give up instead of deadlocking.
					wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
					h, err = l.Acquire(wctx)
					wcancel()
				}
				if errors.Is(err, core.ErrNotAcquired) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if other, ok := holder[name]; ok {
					mu.Unlock()
					errs <- fmt.Errorf("%s granted to worker %d while worker %d holds it", name, w, other)
					return
				}
				holder[name] = w
				mu.Unlock()
				held = append(held, h)
				heldNames = append(heldNames, name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// 500 locks held at once share one connection.
func TestMultiplexManyLocks(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	var hs []core.Handle
	for i := range 500 {
		h, err := p.Mutex(uniqueName(t, fmt.Sprint(i))).TryAcquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	n := len(p.sess.Conns())
	require.Equal(t, 1, n, "connections holding 500 locks")
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}
