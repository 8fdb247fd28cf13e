package locktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

// BenchmarkProvider runs the benchmark suite against the backend cfg
// describes:
//
//   - Uncontended/<primitive>: one TryAcquire+Release cycle per op.
//   - Contended/Mutex: 8 workers, each on its own Provider, hold the lock
//     1 ms and wait 2 ms before trying again; one op is one grant. It
//     reports utilization-% (held time summed over workers / wall time),
//     p99-wait-ms, and min-grants/max-grants per worker (fairness).
func BenchmarkProvider(b *testing.B, cfg Config) {
	p := cfg.New(b)
	prefix := fmt.Sprintf("locktest-bench/%08x/", rand.Uint32())
	for _, prim := range []struct {
		name string
		l    core.Locker
	}{
		{"Mutex", p.Mutex(prefix + "mutex")},
		{"RWMutexRead", p.RWMutex(prefix + "rw").RLocker()},
		{"RWMutexWrite", p.RWMutex(prefix + "rw")},
		{"Semaphore5", p.Semaphore(prefix+"sem", 5)},
	} {
		b.Run("Uncontended/"+prim.name, func(b *testing.B) {
			ctx := context.Background()
			if h, err := prim.l.TryAcquire(ctx); err != nil {
				b.Skipf("%s: %v", prim.name, err)
			} else {
				_ = h.Release(ctx)
			}
			b.ResetTimer()
			for range b.N {
				h, err := prim.l.TryAcquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("Contended/Mutex", func(b *testing.B) {
		const workers = 8
		lockers := make([]core.Locker, workers)
		for i := range lockers {
			lockers[i] = cfg.New(b).Mutex(prefix + "contended")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		b.ResetTimer()
		r, err := MeasureContended(ctx, lockers, Contention{Grants: b.N})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if r.Overlaps > 0 {
			b.Fatalf("%d overlapping grants", r.Overlaps)
		}
		b.ReportMetric(r.Utilization, "utilization-%")
		b.ReportMetric(float64(r.Waits.Percentile(99))/float64(time.Millisecond), "p99-wait-ms")
		b.ReportMetric(float64(slices.Min(r.PerWorker)), "min-grants")
		b.ReportMetric(float64(slices.Max(r.PerWorker)), "max-grants")
	})
}
