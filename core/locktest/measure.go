package locktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
)

// Latencies summarizes a set of durations.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0 < p ≤ 100); the slice must be
// sorted, as the Measure functions return it.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(float64(len(l))*p/100+0.5) - 1
	return l[min(max(i, 0), len(l)-1)]
}

// MeasureUncontended runs n TryAcquire+Release cycles on l and returns each
// cycle's duration, sorted.
func MeasureUncontended(ctx context.Context, l core.Locker, n int) (Latencies, error) {
	out := make(Latencies, 0, n)
	for range n {
		start := time.Now()
		h, err := l.TryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		if err := h.Release(ctx); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out, nil
}

// Contention describes a contended run: each worker loops Acquire, hold,
// Release, think until the run has made Grants grants in all.
type Contention struct {
	Grants int
	Hold   time.Duration // default 1 ms
	Think  time.Duration // default 2 ms
}

// ContendedResult is what MeasureContended saw.
type ContendedResult struct {
	Grants      int
	Wall        time.Duration
	Held        time.Duration // summed over workers, from Acquire returning to Release being called
	Waits       Latencies     // each Acquire call's duration, sorted
	PerWorker   []int         // grants per worker
	Overlaps    int           // grants that found another holder inside: must be 0
	Utilization float64       // Held / Wall, in percent
}

func (r ContendedResult) String() string {
	return fmt.Sprintf("grants=%d utilization=%.1f%% p50-wait=%v p99-wait=%v per-worker=%d..%d overlaps=%d",
		r.Grants, r.Utilization, r.Waits.Percentile(50).Round(time.Microsecond), r.Waits.Percentile(99).Round(time.Microsecond),
		slices.Min(r.PerWorker), slices.Max(r.PerWorker), r.Overlaps)
}

// MeasureContended runs one worker per Locker (all for the same lock, each
// ideally on its own client, as separate processes would be) and measures
// how well the lock is handed over: utilization is the share of wall time
// during which some worker actually held it.
func MeasureContended(ctx context.Context, lockers []core.Locker, c Contention) (ContendedResult, error) {
	if c.Hold == 0 {
		c.Hold = time.Millisecond
	}
	if c.Think == 0 {
		c.Think = 2 * time.Millisecond
	}
	var (
		remaining atomic.Int64
		inside    atomic.Int32
		overlaps  atomic.Int32
		heldNs    atomic.Int64
		mu        sync.Mutex
		waits     Latencies
		firstErr  error
		wg        sync.WaitGroup
	)
	remaining.Store(int64(c.Grants))
	per := make([]int, len(lockers))
	start := time.Now()
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine Latencies
			defer func() {
				mu.Lock()
				waits = append(waits, mine...)
				mu.Unlock()
			}()
			for remaining.Add(-1) >= 0 {
				t0 := time.Now()
				h, err := l.Acquire(ctx)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				t1 := time.Now()
				mine = append(mine, t1.Sub(t0))
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				spin(c.Hold)
				inside.Add(-1)
				heldNs.Add(int64(time.Since(t1)))
				if err := h.Release(ctx); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				per[i]++
				time.Sleep(c.Think)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	slices.Sort(waits)
	r := ContendedResult{
		Grants:    len(waits),
		Wall:      wall,
		Held:      time.Duration(heldNs.Load()),
		Waits:     waits,
		PerWorker: per,
		Overlaps:  int(overlaps.Load()),
	}
	r.Utilization = 100 * float64(r.Held) / float64(wall)
	return r, firstErr
}

// spin holds the lock for d: a sleep would add the timer's slack to every
// hold and understate the backend's utilization.
func spin(d time.Duration) {
	if d >= 5*time.Millisecond {
		time.Sleep(d)
		return
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}
