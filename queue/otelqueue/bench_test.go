package otelqueue_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/otelqueue"
)

// noop is the benchmark's job: it does nothing, so what is measured is the
// queue's and the telemetry's cost per job.
type noop struct{}

func (noop) Kind() string { return "noop" }

// BenchmarkOverhead enqueues b.N no-op jobs, in EnqueueBulk calls of 1,000
// (a producer span each), and works them with one runner under default
// options, timing both from the first enqueue to the last completion
// committed, and reports jobs/s: off without telemetry, on with an SDK that
// keeps metrics in a manual reader and samples every span, which a
// processor counts and drops. Each runs in a fresh schema.
func BenchmarkOverhead(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchOverhead(b, nil) })
	b.Run("on", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		var ended countingProcessor
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(&ended))
		defer func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }()
		tel, err := otelqueue.New(otelqueue.WithMeterProvider(mp), otelqueue.WithTracerProvider(tp))
		if err != nil {
			b.Fatal(err)
		}
		benchOverhead(b, tel)
		if n, want := ended.n.Load(), int64(b.N+(b.N+bulk-1)/bulk); n < want {
			b.Fatalf("%d spans ended, want %d", n, want)
		}
	})
}

// bulk is how many jobs each EnqueueBulk call of the benchmark enqueues.
const bulk = 1000

// countingProcessor counts the spans that end and keeps none, as an
// exporting processor does once it has exported them.
type countingProcessor struct{ n atomic.Int64 }

func (*countingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *countingProcessor) OnEnd(sdktrace.ReadOnlySpan)                   { p.n.Add(1) }
func (*countingProcessor) Shutdown(context.Context) error                  { return nil }
func (*countingProcessor) ForceFlush(context.Context) error                { return nil }

func benchOverhead(b *testing.B, tel *otelqueue.Telemetry) {
	var opts []queue.ClientOption
	if tel != nil {
		opts = append(opts, tel.Option())
	}
	benchOverheadOpt(b, opts...)
}

func benchOverheadOpt(b *testing.B, tel ...queue.ClientOption) {
	db := pgtest.NewDB(b)
	db.SQL.SetMaxOpenConns(20) // as the queue documentation sizes a runner's pool
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	var completed atomic.Int64
	finished := make(chan struct{})
	opts := []queue.ClientOption{queue.WithLogger(slog.New(slog.DiscardHandler)),
		queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
			if ev.Type == queue.EventCompleted && completed.Add(1) == int64(b.N) {
				close(finished)
			}
		}))}
	opts = append(opts, tel...)
	c, err := queue.NewClient(db.Gorm, reg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	jobs := make([]queue.Params, bulk)
	for i := range jobs {
		jobs[i] = queue.Params{Args: noop{}}
	}
	r, err := queue.NewRunner(c)
	if err != nil {
		b.Fatal(err)
	}
	// Start each run with the server's dirty pages written, so that no
	// checkpoint the runs before asked for lands in this one.
	_ = db.Gorm.Exec("CHECKPOINT").Error // needs a superuser or pg_checkpoint; best effort
	b.ResetTimer()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for left := b.N; left > 0; left -= bulk {
		if _, err := c.EnqueueBulk(ctx, jobs[:min(left, bulk)]); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
	b.StopTimer()
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
