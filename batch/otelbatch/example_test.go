package otelbatch_test

import (
	"context"
	"fmt"
	"log/slog"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/otelbatch"
)

// New takes the application's providers; Option installs the telemetry on a
// coordinator. Here the providers keep what they get in memory.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx := context.Background()
	defer func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }()

	tel, err := otelbatch.New(otelbatch.WithMeterProvider(mp), otelbatch.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	processor := batch.ProcessorFunc[string](func(ctx context.Context, b batch.Batch[string]) error {
		return nil // a real processor writes b.Items in one transaction
	})
	c, err := batch.NewCoordinator(processor, tel.Option(),
		batch.WithMaxBatchSize(2), batch.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer tel.Watch(c)()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	_ = c.SendMany(ctx, "INVOICES-7", []string{"a", "b", "c"})
	_ = c.Send(ctx, batch.End[string]("INVOICES-7"))
	if err := c.Shutdown(ctx); err != nil {
		panic(err)
	}

	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), len(s.Events()), "sub-batch events")
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "sheaf.batch.items.processed" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output:
	// sheaf.batch 2 sub-batch events
	// sheaf.batch.items.processed 3
}
