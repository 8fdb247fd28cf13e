package otel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/filelock"
	distotel "github.com/distlock/distlock/observe/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sdk is an in-memory OpenTelemetry SDK: the spans ended and a reader of
// the metrics.
type sdk struct {
	tp     *sdktrace.TracerProvider
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newSDK(t *testing.T) sdk {
	s := sdk{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	t.Cleanup(func() {
		_ = s.tp.Shutdown(context.Background())
		_ = s.mp.Shutdown(context.Background())
	})
	return s
}

// point is one data point's value, found by metric name and attributes.
func (s sdk) point(t *testing.T, name string, attrs ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Count), true
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Value), true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Value), true
					}
				}
			}
		}
	}
	return 0, false
}

func (s sdk) expect(t *testing.T, want float64, name string, attrs ...attribute.KeyValue) {
	t.Helper()
	if got, ok := s.point(t, name, attrs...); !ok || got != want {
		t.Errorf("%s%v = %v (present: %v), want %v", name, attrs, got, ok, want)
	}
}

func attrOf(span sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func TestObserverFile(t *testing.T) {
	s := newSDK(t)
	o, err := distotel.New(distotel.WithTracerProvider(s.tp), distotel.WithMeterProvider(s.mp))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rec locktest.Recorder
	p, err := filelock.New(dir, filelock.WithObserver(o), filelock.WithObserver(&rec),
		filelock.WithCheckInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	ctx, request := s.tp.Tracer("test").Start(context.Background(), "request")
	l := p.Mutex("otel-test")
	h, err := l.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	request.End()
	if h, err = l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One check of the held lock file, the file backend's renewal.
	rec.WaitFor(t, 10*time.Second, func(e core.Event) bool { return e.Kind == core.EventRenew })
	files, _ := filepath.Glob(filepath.Join(dir, "mutex", "*.lock"))
	if len(files) != 1 {
		t.Fatalf("lock files %v", files)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 10*time.Second, func(e core.Event) bool { return e.Kind == core.EventLost })

	spans := s.spans.Ended()
	want := []struct {
		name, outcome string
		token         uint64
		child         bool
	}{
		{"distlock.acquire", "acquired", h.FencingToken() - 1, true},
		{"distlock.acquire", "busy", 0, true},
		{"distlock.release", "released", h.FencingToken() - 1, true},
		{"request", "", 0, false},
		{"distlock.acquire", "acquired", h.FencingToken(), false},
		{"distlock.lost", "lost", h.FencingToken(), false},
	}
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(spans), len(want))
	}
	parent := request.SpanContext().SpanID()
	for i, w := range want {
		sp := spans[i]
		if sp.Name() != w.name || attrOf(sp, "distlock.outcome").AsString() != w.outcome ||
			uint64(attrOf(sp, "distlock.token").AsInt64()) != w.token || (sp.Parent().SpanID() == parent) != w.child {
			t.Errorf("span %d: %s %v parent %v, want %+v", i, sp.Name(), sp.Attributes(), sp.Parent().SpanID(), w)
		}
		if w.name != "request" && (attrOf(sp, "distlock.backend").AsString() != "file" || attrOf(sp, "distlock.lock").AsString() != "otel-test") {
			t.Errorf("span %d lacks the backend or the lock: %v", i, sp.Attributes())
		}
	}
	if st := spans[5].Status(); st.Code != codes.Error {
		t.Errorf("the lost span's status is %v, want an error", st)
	}

	file := attribute.String("distlock.backend", "file")
	outcome := func(o string) attribute.KeyValue { return attribute.String("distlock.outcome", o) }
	s.expect(t, 2, "distlock.acquire.duration", file, outcome("acquired"))
	s.expect(t, 1, "distlock.acquire.duration", file, outcome("busy"))
	s.expect(t, 1, "distlock.hold.duration", file, outcome("released"))
	s.expect(t, 1, "distlock.hold.duration", file, outcome("lost"))
	s.expect(t, 0, "distlock.held", file)
	s.expect(t, 0, "distlock.waiting", file)
	s.expect(t, 1, "distlock.lost", file)
	if n, _ := s.point(t, "distlock.renewals", file, attribute.String("distlock.result", "renewed")); n < 1 {
		t.Error("no renewal (a check of the lock file) recorded")
	}
	_ = h.Release(context.Background())
}

func TestElections(t *testing.T) {
	s := newSDK(t)
	m, err := distotel.NewElections(distotel.WithMeterProvider(s.mp))
	if err != nil {
		t.Fatal(err)
	}
	leader := attribute.String("distlock.group", "leader")
	m.SetLeader("leader", true)
	m.Transition("leader", election.Promoted, 7)
	s.expect(t, 1, "distlock.election.leader", leader)
	s.expect(t, 7, "distlock.election.term", leader)
	m.SetLeader("leader", false)
	m.Transition("leader", election.Demoted, 7)
	m.CampaignFailed("leader", errors.New("store down"))
	s.expect(t, 0, "distlock.election.leader", leader)
	s.expect(t, 1, "distlock.election.transitions", leader, attribute.String("distlock.transition", "demoted"))
	s.expect(t, 1, "distlock.election.campaign_failures", leader)
}
