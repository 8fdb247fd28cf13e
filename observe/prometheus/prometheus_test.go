package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/filelock"
	distprom "github.com/distlock/distlock/observe/prometheus"
	"github.com/distlock/distlock/redislock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// endpoint serves collectors on /metrics, as a process would.
type endpoint struct {
	url string
}

func serve(t *testing.T, cs ...prometheus.Collector) endpoint {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return endpoint{url: srv.URL + "/metrics"}
}

// scrape fetches the endpoint and returns each sample by series:
// `name{label="value",...}` with the labels sorted; a histogram gives
// its _count and _sum.
func (e endpoint) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(ls)
			series := "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Histogram != nil:
				out[name+"_count"+series] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+series] = m.GetHistogram().GetSampleSum()
			case m.Gauge != nil:
				out[name+series] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[name+series] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// expect checks the series of want against a scrape.
func (e endpoint) expect(t *testing.T, want map[string]float64) {
	t.Helper()
	got := e.scrape(t)
	for series, v := range want {
		if g, ok := got[series]; !ok || g != v {
			t.Errorf("%s = %v (present: %v), want %v", series, g, ok, v)
		}
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", dump(got))
		t.FailNow()
	}
}

func dump(m map[string]float64) string {
	var lines []string
	for k, v := range m {
		if strings.HasPrefix(k, "distlock_") {
			lines = append(lines, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// exercise drives a mutex of p through every outcome and a loss, checking
// the scraped series of backend after each step. brk breaks a grant from
// outside; rec is an observer of p given after the metrics, so that an
// event it has seen is counted already.
func exercise(t *testing.T, e endpoint, p core.Provider, backend string, rec *locktest.Recorder, brk func(core.Handle)) {
	ctx := context.Background()
	l := p.Mutex("prom-test")
	h, err := l.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = l.Acquire(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held lock: %v", err)
	}
	s := func(name, labels string) string {
		return fmt.Sprintf(`%s{backend=%q,%sprimitive="mutex"}`, name, backend, labels)
	}
	e.expect(t, map[string]float64{
		s("distlock_acquire_duration_seconds_count", `outcome="acquired",`):  1,
		s("distlock_acquire_duration_seconds_count", `outcome="busy",`):      1,
		s("distlock_acquire_duration_seconds_count", `outcome="cancelled",`): 1,
		s("distlock_held", ""):    1,
		s("distlock_waiting", ""): 0,
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err = l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	brk(h)
	rec.WaitFor(t, 10*time.Second, func(e core.Event) bool { return e.Kind == core.EventLost })
	_ = h.Release(ctx) // the lost grant's release ends nothing more
	e.expect(t, map[string]float64{
		s("distlock_acquire_duration_seconds_count", `outcome="acquired",`): 2,
		s("distlock_hold_duration_seconds_count", `outcome="released",`):    1,
		s("distlock_hold_duration_seconds_count", `outcome="lost",`):        1,
		s("distlock_lost_total", ""):                                        1,
		s("distlock_held", ""):                                              0,
	})
}

func TestLocksFile(t *testing.T) {
	dir := t.TempDir()
	m := distprom.NewLocks()
	e := serve(t, m)
	var rec locktest.Recorder
	p, err := filelock.New(dir, filelock.WithObserver(m), filelock.WithObserver(&rec),
		filelock.WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	exercise(t, e, p, "file", &rec, func(core.Handle) {
		files, err := filepath.Glob(filepath.Join(dir, "mutex", "*.lock"))
		if err != nil || len(files) != 1 {
			t.Fatalf("lock files %v, %v", files, err)
		}
		if err := os.Remove(files[0]); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLocksRedis(t *testing.T) {
	addr, _, _ := strings.Cut(locktest.RequireEnv(t, "DISTLOCK_REDIS_ADDRS"), ",")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("distlock-prom-test:%08x:", rand.Uint32())
	m := distprom.NewLocks()
	e := serve(t, m)
	var rec locktest.Recorder
	p, err := redislock.New(rdb, redislock.WithPrefix(prefix), redislock.WithTTL(time.Second),
		redislock.WithObserver(m), redislock.WithObserver(&rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	exercise(t, e, p, "redis", &rec, func(core.Handle) {
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("keys %v, %v", keys, err)
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	})
	// The loss was found by a renewal.
	got := e.scrape(t)
	if got[`distlock_renewals_total{backend="redis",primitive="mutex",result="lost"}`] != 1 {
		t.Fatalf("no lost renewal counted:\n%s", dump(got))
	}
}

func TestLocksNames(t *testing.T) {
	m := distprom.NewLocks(distprom.WithLockNames())
	e := serve(t, m)
	m.Observe(context.Background(), core.Event{Kind: core.EventAcquire, Backend: "b", Primitive: "semaphore", Name: "jobs", Try: true, Token: 1})
	e.expect(t, map[string]float64{
		`distlock_acquire_duration_seconds_count{backend="b",lock="jobs",outcome="acquired",primitive="semaphore"}`: 1,
		`distlock_held{backend="b",lock="jobs",primitive="semaphore"}`:                                              1,
	})
}

// BenchmarkLocksObserve is the adapter's cost per grant: the events of a
// TryAcquire and its Release.
func BenchmarkLocksObserve(b *testing.B) {
	m := distprom.NewLocks()
	acq := core.Event{Kind: core.EventAcquire, Backend: "file", Primitive: "mutex", Name: "a", Token: 1, Try: true, Duration: time.Microsecond}
	rel := core.Event{Kind: core.EventRelease, Backend: "file", Primitive: "mutex", Name: "a", Token: 1, Duration: time.Microsecond, Held: time.Millisecond}
	ctx := context.Background()
	for b.Loop() {
		m.Observe(ctx, acq)
		m.Observe(ctx, rel)
	}
}

// BenchmarkFileObserved is an uncontended TryAcquire and Release on the
// file backend without an observer and with Locks.
func BenchmarkFileObserved(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []filelock.Option
	}{
		{"None", nil},
		{"Prometheus", []filelock.Option{filelock.WithObserver(distprom.NewLocks())}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := filelock.New(b.TempDir(), c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			l := p.Mutex("bench")
			ctx := context.Background()
			for b.Loop() {
				h, err := l.TryAcquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = h.Release(ctx)
			}
		})
	}
}
