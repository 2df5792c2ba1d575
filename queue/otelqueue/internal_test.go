package otelqueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sheaf-dev/sheaf/queue"
)

// TestParseTraceparentAgreesWithW3C checks the hand-written reader against
// the W3C propagator it stands in for, on good and bad headers.
func TestParseTraceparentAgreesWithW3C(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	headers := []string{
		"00-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-00",
		"00-" + tid + "-" + sid + "-03",                 // flags beyond sampled are kept
		"01-" + tid + "-" + sid + "-01-what-comes-next", // a later version may add fields
		"01-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-01-extra", // version 00 may not
		"01-" + tid + "-" + sid + "-01x",
		"ff-" + tid + "-" + sid + "-01",
		"00-" + "4BF92F3577B34DA6A3CE929D0E0E4736" + "-" + sid + "-01",
		"00-00000000000000000000000000000000-" + sid + "-01",
		"00-" + tid + "-0000000000000000-01",
		"00-" + tid + "-" + sid + "-0g",
		"00-" + tid + "-" + sid + "-1",
		"00-" + tid + "-" + sid,
		"00_" + tid + "_" + sid + "_01",
		"0g-" + tid + "-" + sid + "-01",
		"",
		"garbage",
	}
	states := []string{"", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", "not a state=="}
	for _, h := range headers {
		for _, st := range states {
			carrier := propagation.MapCarrier{"traceparent": h}
			if st != "" {
				carrier["tracestate"] = st
			}
			want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
			got := parseTraceparent(h, st)
			require.Equal(t, want.IsValid(), got.IsValid(), "%q", h)
			if want.IsValid() {
				require.True(t, want.Equal(got), "%q %q: got %v, want %v", h, st, got, want)
				require.Equal(t, want.TraceState().String(), got.TraceState().String(), "%q %q", h, st)
				require.True(t, got.IsRemote())
			}
		}
	}
}

// nopProcessor ends spans without keeping them.
type nopProcessor struct{}

func (nopProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (nopProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (nopProcessor) Shutdown(context.Context) error                  { return nil }
func (nopProcessor) ForceFlush(context.Context) error                { return nil }

// BenchmarkAttemptHook measures what the telemetry adds to an attempt on
// its own, without a database: its span, linked to the enqueue's, and
// its measurements.
func BenchmarkAttemptHook(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(nopProcessor{}))
	tel, err := New(WithMeterProvider(mp), WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	job := &queue.JobRecord{ID: 12345, Kind: "noop", Queue: queue.DefaultQueue, Attempts: 1, RunAt: now, CreatedAt: now, StartedAt: &now,
		Metadata: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ev := queue.Event{Type: queue.EventCompleted, Kind: job.Kind, Queue: job.Queue, Duration: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		_, done := tel.attempt(context.Background(), job)
		done(ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
}

// An attempt's span does not link to itself when the propagator cannot
// read the job's traceparent.
func TestAttemptWithUnreadableTraceparentHasNoLink(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tel, err := New(WithTracerProvider(tp),
		WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})))
	require.NoError(t, err)
	now := time.Now()
	job := &queue.JobRecord{ID: 1, Kind: "noop", Queue: queue.DefaultQueue, Attempts: 1, RunAt: now, CreatedAt: now, StartedAt: &now,
		Metadata: map[string]string{"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}}
	_, done := tel.attempt(context.Background(), job)
	done(queue.Event{Type: queue.EventCompleted, Kind: job.Kind, Queue: job.Queue})
	spans := rec.Ended()
	require.Len(t, spans, 1)
	require.Empty(t, spans[0].Links())
}
