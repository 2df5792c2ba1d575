package otelbatch_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/otelbatch"
	"github.com/sheaf-dev/sheaf/cleanup"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type harness struct {
	reader   *sdkmetric.ManualReader
	recorder *tracetest.SpanRecorder
	tel      *otelbatch.Telemetry
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), recorder: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.recorder), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	tel, err := otelbatch.New(otelbatch.WithMeterProvider(mp), otelbatch.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	h.tel = tel
	return h
}

// run sends items to batch "B-1" through a coordinator of sub-batches of 2,
// whose processor fails sub-batch failAt (0: never) and whose cleanup
// strategy returns cleanupErr.
func (h *harness) run(t *testing.T, items, failAt int, cleanupErr error) {
	t.Helper()
	proc := batch.ProcessorFunc[int](func(ctx context.Context, b batch.Batch[int]) error {
		if b.Seq == failAt {
			return errors.New("constraint violated")
		}
		return nil
	})
	c, err := batch.NewCoordinator(proc, h.tel.Option(),
		batch.WithMaxBatchSize(2), batch.WithWorkers(1),
		batch.WithLogger(slog.New(slog.DiscardHandler)),
		batch.WithCleanup(cleanup.Func(func(context.Context, string, int) error { return cleanupErr })))
	if err != nil {
		t.Fatal(err)
	}
	stop := h.tel.Watch(c)
	defer stop()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if err := c.Send(ctx, batch.Data("B-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Send(ctx, batch.End[int]("B-1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// metrics collects the metrics by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbatch.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	return got
}

// sum returns the value of counter name for the given attributes.
func sum(t *testing.T, ms map[string]metricdata.Aggregation, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := ms[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s: %T, want Sum[int64]", name, ms[name])
	}
	want := attribute.NewSet(attrs...)
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	return 0
}

// want is the expected value of a counter for a set of attributes.
type want struct {
	name  string
	n     int64
	attrs []attribute.KeyValue
}

func checkSums(t *testing.T, ms map[string]metricdata.Aggregation, wants ...want) {
	t.Helper()
	for _, w := range wants {
		if n := sum(t, ms, w.name, w.attrs...); n != w.n {
			t.Errorf("%s %v = %d, want %d", w.name, w.attrs, n, w.n)
		}
	}
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestCompleted(t *testing.T) {
	h := newHarness(t)
	h.run(t, 5, 0, nil)

	spans := h.recorder.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "sheaf.batch" || s.Status().Code != codes.Unset {
		t.Errorf("span %q status %v", s.Name(), s.Status())
	}
	a := attrs(s.Attributes())
	if a[otelbatch.AttrBatchID].AsString() != "B-1" || a[otelbatch.AttrBatchSize].AsInt64() != 5 ||
		a[otelbatch.AttrSubBatches].AsInt64() != 3 || a[otelbatch.AttrOutcome].AsString() != "completed" {
		t.Errorf("span attributes %v", s.Attributes())
	}
	if _, ok := a[otelbatch.AttrErrorType]; ok {
		t.Errorf("error.type on a completed batch")
	}
	ev := s.Events()
	if len(ev) != 3 {
		t.Fatalf("%d events, want 3", len(ev))
	}
	for i, e := range ev {
		ea := attrs(e.Attributes)
		wantItems := int64(2)
		if i == 2 {
			wantItems = 1
		}
		if e.Name != "sheaf.batch.sub_batch" || ea[otelbatch.AttrSubBatchIndex].AsInt64() != int64(i+1) ||
			ea[otelbatch.AttrSubBatchItems].AsInt64() != wantItems || ea[otelbatch.AttrSubBatchDur].AsFloat64() < 0 {
			t.Errorf("event %d: %s %v", i, e.Name, e.Attributes)
		}
		if e.Time.Before(s.StartTime()) || e.Time.After(s.EndTime()) {
			t.Errorf("event %d at %v outside the span", i, e.Time)
		}
	}
	if s.Parent().IsValid() {
		t.Errorf("span has a parent")
	}

	ms := h.metrics(t)
	checkSums(t, ms,
		want{"sheaf.batch.batches", 1, []attribute.KeyValue{otelbatch.AttrOutcome.String("completed")}},
		want{"sheaf.batch.items.processed", 5, nil},
		want{"sheaf.batch.items.discarded", 0, nil})
	if _, ok := ms["sheaf.batch.cleanups"]; ok {
		t.Errorf("cleanups reported for a completed batch")
	}
	hist, ok := ms["sheaf.batch.sub_batch.duration"].(metricdata.Histogram[float64])
	if !ok || len(hist.DataPoints) != 1 || hist.DataPoints[0].Count != 3 || hist.DataPoints[0].Attributes.Len() != 0 {
		t.Errorf("duration histogram %+v", ms["sheaf.batch.sub_batch.duration"])
	}
}

func TestFailedAndCleanedUp(t *testing.T) {
	h := newHarness(t)
	// Sub-batches of 2 items out of 7: 1 succeeds, 2 fails, 3 and 4 (3
	// items) are discarded, with the 2 of sub-batch 2.
	h.run(t, 7, 2, nil)

	spans := h.recorder.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Status().Code != codes.Error || s.Status().Description == "" {
		t.Errorf("status %v", s.Status())
	}
	a := attrs(s.Attributes())
	if a[otelbatch.AttrOutcome].AsString() != "failed" || a[otelbatch.AttrErrorType].AsString() != "*errors.errorString" ||
		a[otelbatch.AttrFailedSeq].AsInt64() != 2 || a[otelbatch.AttrBatchSize].AsInt64() != 4 || a[otelbatch.AttrSubBatches].AsInt64() != 2 {
		t.Errorf("span attributes %v", s.Attributes())
	}
	ev := s.Events()
	if len(ev) != 3 || ev[0].Name != "sheaf.batch.sub_batch" || ev[1].Name != "sheaf.batch.sub_batch" || ev[2].Name != "sheaf.batch.cleanup" {
		t.Fatalf("events %+v", ev)
	}
	fa := attrs(ev[1].Attributes)
	if fa[otelbatch.AttrSubBatchIndex].AsInt64() != 2 || fa[otelbatch.AttrSubBatchError].AsString() != "constraint violated" ||
		fa[otelbatch.AttrErrorType].AsString() != "*errors.errorString" {
		t.Errorf("failed sub-batch event %v", ev[1].Attributes)
	}
	if len(ev[2].Attributes) != 0 {
		t.Errorf("cleanup event %v", ev[2].Attributes)
	}

	ms := h.metrics(t)
	checkSums(t, ms,
		want{"sheaf.batch.batches", 1, []attribute.KeyValue{otelbatch.AttrOutcome.String("failed"), otelbatch.AttrErrorType.String("*errors.errorString")}},
		want{"sheaf.batch.items.processed", 2, nil},
		want{"sheaf.batch.items.discarded", 5, nil},
		want{"sheaf.batch.cleanups", 1, nil})
	if _, ok := ms["sheaf.batch.cleanup.failures"]; ok {
		t.Errorf("cleanup failures reported")
	}
	hist := ms["sheaf.batch.sub_batch.duration"].(metricdata.Histogram[float64])
	counts := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		v, _ := dp.Attributes.Value(otelbatch.AttrErrorType)
		counts[v.AsString()] += dp.Count
	}
	if counts[""] != 1 || counts["*errors.errorString"] != 1 {
		t.Errorf("duration counts by error.type %v", counts)
	}
}

func TestCleanupFails(t *testing.T) {
	h := newHarness(t)
	h.run(t, 3, 1, errors.New("database gone"))
	ms := h.metrics(t)
	if n := sum(t, ms, "sheaf.batch.cleanups"); n != 1 {
		t.Errorf("cleanups %d", n)
	}
	if n := sum(t, ms, "sheaf.batch.cleanup.failures", otelbatch.AttrErrorType.String("*errors.errorString")); n != 1 {
		t.Errorf("cleanup failures %d", n)
	}
	ev := h.recorder.Ended()[0].Events()
	last := attrs(ev[len(ev)-1].Attributes)
	if last[otelbatch.AttrCleanupError].AsString() != "database gone" {
		t.Errorf("cleanup event %v", ev[len(ev)-1])
	}
}

// Metrics never carry a batch ID.
func TestMetricsHaveNoIDs(t *testing.T) {
	h := newHarness(t)
	h.run(t, 3, 2, nil)
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, s := range sets {
				for _, kv := range s.ToSlice() {
					if kv.Key == otelbatch.AttrBatchID || kv.Value.String() == "B-1" {
						t.Errorf("%s carries %v", m.Name, kv)
					}
				}
			}
		}
	}
}
