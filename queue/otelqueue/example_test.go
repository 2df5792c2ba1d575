package otelqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/otelqueue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// New takes the application's providers; Option installs the telemetry on a
// client, whose runners inherit it. Here the providers keep what they get
// in memory, and the queue is an SQLite file.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }()

	tel, err := otelqueue.New(otelqueue.WithMeterProvider(mp), otelqueue.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "otelqueue-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(filepath.Join(dir, "sheaf.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()

	reg := queue.NewRegistry()
	done := make(chan struct{})
	if err := queue.Register(reg, queue.HandlerFunc[report](func(ctx context.Context, j *queue.Job[report]) error {
		return nil // ctx carries the attempt's span: the handler's spans nest under it
	})); err != nil {
		panic(err)
	}
	client, err := queue.NewClient(db, reg, tel.Option(), queue.WithLogger(slog.New(slog.DiscardHandler)),
		queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
			if ev.Type == queue.EventCompleted {
				close(done)
			}
		})))
	if err != nil {
		panic(err)
	}
	if err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	runner, err := queue.NewRunner(client)
	if err != nil {
		panic(err)
	}
	if err := runner.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, report{County: "Travis"}); err != nil {
		panic(err)
	}
	<-done
	if err := runner.Stop(ctx); err != nil {
		panic(err)
	}

	// Spans are recorded as they end, and the job may finish before
	// Enqueue's own span ends: print them in the order they started.
	ended := spans.Ended()
	slices.SortFunc(ended, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for _, s := range ended {
		fmt.Println(s.Name(), s.SpanKind(), len(s.Links()), "link(s)")
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "messaging.client.consumed.messages" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output:
	// enqueue default producer 0 link(s)
	// process default consumer 1 link(s)
	// messaging.client.consumed.messages 1
}
