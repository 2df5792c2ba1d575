package otelbatch_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/otelbatch"
)

// BenchmarkOverhead sends b.N items, one Send each, as producers do, in
// batches of 50,000 in sub-batches of the default size, 5,000, through a
// processor that does nothing, so that the engine's and the telemetry's
// costs are all there is, and reports items/s: off without telemetry, on
// with an SDK that keeps metrics in a manual reader and samples every
// span, which a processor counts and drops. Each batch ends with an End,
// as in production, so every one makes a span.
func BenchmarkOverhead(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchOverhead(b, nil) })
	b.Run("on", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		var ended countingProcessor
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithSpanProcessor(&ended))
		defer func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }()
		tel, err := otelbatch.New(otelbatch.WithMeterProvider(mp), otelbatch.WithTracerProvider(tp))
		if err != nil {
			b.Fatal(err)
		}
		benchOverhead(b, tel)
		if n, want := ended.n.Load(), int64((b.N+batchItems-1)/batchItems); n != want {
			b.Fatalf("%d spans ended, want %d", n, want)
		}
	})
}

// countingProcessor counts the spans that end and keeps none, as an
// exporting processor does once it has exported them.
type countingProcessor struct{ n atomic.Int64 }

func (*countingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *countingProcessor) OnEnd(sdktrace.ReadOnlySpan)                   { p.n.Add(1) }
func (*countingProcessor) Shutdown(context.Context) error                  { return nil }
func (*countingProcessor) ForceFlush(context.Context) error                { return nil }

// batchItems is how many items each batch of the benchmark has.
const batchItems = 50_000

func benchOverhead(b *testing.B, tel *otelbatch.Telemetry) {
	opts := []batch.Option{batch.WithMaxBatchSize(batch.DefaultMaxBatchSize), batch.WithBufferReuse(true),
		batch.WithLogger(slog.New(slog.DiscardHandler))}
	if tel != nil {
		opts = append(opts, tel.Option())
	}
	c, err := batch.NewCoordinator(batch.ProcessorFunc[int64](func(context.Context, batch.Batch[int64]) error { return nil }), opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = "bench-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[(i/batchItems)%len(ids)]
		if err := c.Send(ctx, batch.Data(id, int64(i))); err != nil {
			b.Fatal(err)
		}
		if (i+1)%batchItems == 0 || i == b.N-1 {
			if err := c.Send(ctx, batch.End[int64](id)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
