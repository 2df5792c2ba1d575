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

// BenchmarkOverhead runs batches of 50,000 items in sub-batches of the
// default size, 5,000, through a processor that does nothing, so that the engine's and the
// telemetry's costs are all there is: off without telemetry, on with an SDK
// that keeps metrics in a manual reader and samples every span, which a
// processor counts and drops. Each batch
// ends with its own ID, as in production, so every one makes a span.
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
		if n := ended.n.Load(); n != int64(b.N) {
			b.Fatalf("%d spans ended, want %d", n, b.N)
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

func benchOverhead(b *testing.B, tel *otelbatch.Telemetry) {
	const items, size = 50_000, batch.DefaultMaxBatchSize
	opts := []batch.Option{batch.WithMaxBatchSize(size), batch.WithBufferReuse(true),
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
	buf := make([]int64, items)
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = "bench-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		if err := c.SendMany(ctx, id, buf); err != nil {
			b.Fatal(err)
		}
		if err := c.Send(ctx, batch.End[int64](id)); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*items/b.Elapsed().Seconds(), "items/s")
}
