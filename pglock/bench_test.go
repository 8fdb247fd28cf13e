package pglock

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// rawLocker is the floor pglock is measured against: pg_advisory_lock and
// pg_advisory_unlock on one connection, no fencing, no loss detection.
type rawLocker struct {
	conn *pgx.Conn
	key  int64
}

func (l *rawLocker) Name() string { return "raw" }

func (l *rawLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	var ok bool
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&ok); err != nil {
		return nil, err
	}
	if !ok {
		return nil, core.Busy("held")
	}
	return l.handle(), nil
}

func (l *rawLocker) Acquire(ctx context.Context) (core.Handle, error) {
	if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key); err != nil {
		return nil, err
	}
	return l.handle(), nil
}

func (l *rawLocker) handle() core.Handle {
	return core.NewHandle(1, func(ctx context.Context) error {
		_, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key)
		return err
	})
}

func newRawLocker(b *testing.B, key int64) *rawLocker {
	url := locktest.RequireEnv(b, "DISTLOCK_PG_URL")
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(b, err)
	b.Cleanup(func() { conn.Close(context.Background()) })
	return &rawLocker{conn: conn, key: key}
}

// BenchmarkCompare measures pglock against the raw floor: uncontended
// TryAcquire+Release, and 8 contended workers (hold 1 ms, think 2 ms), each
// on its own connection or Provider, as separate processes would be.
func BenchmarkCompare(b *testing.B) {
	key := int64(rand.Uint64())
	name := uniqueName(b, "cmp")
	contenders := []struct {
		name string
		new  func(b *testing.B) core.Locker
	}{
		{"raw", func(b *testing.B) core.Locker { return newRawLocker(b, key) }},
		{"pglock", func(b *testing.B) core.Locker { return newProvider(b).Mutex(name) }},
	}
	for _, c := range contenders {
		b.Run("Uncontended/"+c.name, func(b *testing.B) {
			l := c.new(b)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				h, err := l.TryAcquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, c := range contenders {
		b.Run("Contended/"+c.name, func(b *testing.B) {
			lockers := make([]core.Locker, 8)
			for i := range lockers {
				lockers[i] = c.new(b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			b.ResetTimer()
			r, err := locktest.MeasureContended(ctx, lockers, locktest.Contention{Grants: b.N})
			if err != nil {
				b.Fatal(err)
			}
			if r.Overlaps > 0 {
				b.Fatalf("%d overlapping grants", r.Overlaps)
			}
			b.ReportMetric(r.Utilization, "utilization-%")
			b.ReportMetric(float64(r.Waits.Percentile(99))/float64(time.Millisecond), "p99-wait-ms")
		})
	}
}
