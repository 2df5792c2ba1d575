// Command telemetry runs report jobs and a batch with OpenTelemetry
// installed on both halves of sheaf, queue/otelqueue and batch/otelbatch,
// and serves the metrics for Prometheus on /metrics through the
// OpenTelemetry Prometheus exporter.
//
//	go run ./examples/telemetry [-addr 127.0.0.1:9464] [-dsn postgres://...] [-traces] [-smoke]
//
// It enqueues county reports (one fails once and is retried, one fails for
// good), a chunked import and a batch of orders; each report releases a
// summary by a dependency rule. With -traces the spans are printed on
// standard output by the stdout exporter. It serves until Ctrl-C; with
// -smoke it waits for the jobs, scrapes its own /metrics over HTTP, prints
// the sheaf lines and exits, failing if one is missing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/otelbatch"
	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/otelqueue"
)

type options struct {
	addr   string
	dsn    string
	traces bool
	smoke  bool
	// ready, if set, is told the address the server listens on.
	ready func(addr string)
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:9464", "address to serve /metrics on")
	flag.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a temporary folder)")
	flag.BoolVar(&o.traces, "traces", false, "print the spans on standard output (stdout exporter)")
	flag.BoolVar(&o.smoke, "smoke", false, "wait for the jobs, scrape /metrics once, print the sheaf lines and exit")
	flag.Parse()
	if o.dsn == "" {
		o.dsn = os.Getenv("DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal("telemetry: ", err)
	}
}

// CountyReport is a report job; Fail makes its first Fail attempts fail.
type CountyReport struct {
	County string `json:"county"`
	Fail   int    `json:"fail,omitempty"`
}

// Kind names the job type.
func (CountyReport) Kind() string { return "county_report" }

// Summary is released by each completed report.
type Summary struct{}

// Kind names the job type.
func (Summary) Kind() string { return "summary" }

// Import is a chunked job of Rows records.
type Import struct{ Rows int }

// Kind names the job type.
func (Import) Kind() string { return "import" }

type importer struct{}

func (importer) Records(_ context.Context, j *queue.Job[Import]) (int64, iter.Seq2[int, error], error) {
	return int64(j.Args.Rows), func(yield func(int, error) bool) {
		for i := range j.Args.Rows {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}
func (importer) ProcessChunk(context.Context, *queue.Job[Import], batch.Batch[int]) error { return nil }
func (importer) Cleanup(context.Context, *queue.Job[Import]) error                        { return nil }

// jobs is how many jobs finish (complete or fail for good): the four
// reports, the summaries of the three that complete, and the import.
const jobs = 4 + 3 + 1

func run(ctx context.Context, o options, out io.Writer) (err error) {
	// Metrics: the Prometheus exporter is a reader of the SDK's meter
	// provider; it registers with a registry of the program's own.
	promReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(promReg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sdktrace.AlwaysSample())}
	if o.traces {
		se, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
		if err != nil {
			return err
		}
		tpOpts = append(tpOpts, sdktrace.WithSyncer(se))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()

	qtel, err := otelqueue.New(otelqueue.WithMeterProvider(mp), otelqueue.WithTracerProvider(tp),
		otelqueue.WithGaugeInterval(time.Second))
	if err != nil {
		return err
	}
	btel, err := otelbatch.New(otelbatch.WithMeterProvider(mp), otelbatch.WithTracerProvider(tp))
	if err != nil {
		return err
	}

	db, err := exampledb.Open(ctx, "sheaf_telemetry", o.dsn, 10)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := queue.NewRegistry()
	err = errors.Join(
		queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
			// The handler's own spans nest under the attempt's.
			_, span := tp.Tracer("telemetry-example").Start(ctx, "render "+j.Args.County)
			defer span.End()
			if j.Attempt <= j.Args.Fail {
				return fmt.Errorf("county %s: source unavailable", j.Args.County)
			}
			return nil
		}), queue.MaxAttempts(2), queue.RetryBackoff(queue.Delays{0})),
		queue.Register(reg, queue.HandlerFunc[Summary](func(context.Context, *queue.Job[Summary]) error { return nil })),
		queue.RegisterChunked[Import, int](reg, importer{}, queue.ChunkSize(400)),
		queue.Depend(reg, queue.Rule{Name: "summarise", Parents: []string{"county_report"}, Each: true},
			func([]queue.JobRecord) (Summary, []queue.EnqueueOption) { return Summary{}, nil }),
	)
	if err != nil {
		return err
	}
	var finished atomic.Int64
	allDone := make(chan struct{})
	client, err := queue.NewClient(db.DB, reg, qtel.Option(),
		queue.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))),
		queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
			if (ev.Type == queue.EventCompleted || ev.Type == queue.EventFailed) && finished.Add(1) == jobs {
				close(allDone)
			}
		})))
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	defer qtel.Watch(client)()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(context.Background()); <-served }()
	addr := ln.Addr().String()
	fmt.Fprintf(out, "telemetry: serving http://%s/metrics\n", addr)
	if o.ready != nil {
		o.ready(addr)
	}

	runner, err := queue.NewRunner(client, queue.WithWorkers(4), queue.WithPollInterval(100*time.Millisecond))
	if err != nil {
		return err
	}
	// Started on a context the signal does not cancel, which would cut the
	// running jobs short at once: when ctx ends, Stop gives them ten
	// seconds, then puts back in the queue those that have not finished.
	if err := runner.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, runner.Stop(stopCtx))
	}()
	if err := enqueue(ctx, tp, client); err != nil {
		return err
	}
	if err := runBatch(ctx, btel); err != nil {
		return err
	}
	select {
	case <-allDone:
	case <-ctx.Done():
		return nil
	}
	if !o.smoke {
		fmt.Fprintln(out, "telemetry: jobs done; Ctrl-C to stop")
		<-ctx.Done()
		return nil
	}
	return scrape(ctx, "http://"+addr+"/metrics", out)
}

// enqueue submits the jobs inside a span of the caller's, as a request
// handler would.
func enqueue(ctx context.Context, tp trace.TracerProvider, client *queue.Client) error {
	ctx, span := tp.Tracer("telemetry-example").Start(ctx, "nightly request")
	defer span.End()
	_, err := client.EnqueueMany(ctx, []queue.Params{
		{Args: CountyReport{County: "Travis"}},
		{Args: CountyReport{County: "Bexar", Fail: 1}}, // fails once, then completes
		{Args: CountyReport{County: "Harris"}},
	})
	if err != nil {
		return err
	}
	if _, err := client.Enqueue(ctx, CountyReport{County: "Dallas", Fail: 2}); err != nil { // fails for good
		return err
	}
	_, err = client.Enqueue(ctx, Import{Rows: 1000})
	return err
}

// runBatch sends a batch of orders through the engine with otelbatch.
func runBatch(ctx context.Context, tel *otelbatch.Telemetry) error {
	c, err := batch.NewCoordinator(batch.ProcessorFunc[int](func(context.Context, batch.Batch[int]) error { return nil }),
		tel.Option(), batch.WithMaxBatchSize(250), batch.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer tel.Watch(c)()
	if err := c.Start(ctx); err != nil {
		return err
	}
	for i := range 1000 {
		if err := c.Send(ctx, batch.Data("ORDERS-2025-12-08", i)); err != nil {
			return err
		}
	}
	if err := c.Send(ctx, batch.End[int]("ORDERS-2025-12-08")); err != nil {
		return err
	}
	return c.Shutdown(ctx)
}

// wanted are metrics a smoke run must find in the scrape (Prometheus
// names: dots become underscores, and units and _total are appended).
var wanted = []string{
	"messaging_client_sent_messages_total",
	"messaging_client_consumed_messages_total",
	"messaging_process_duration_seconds_bucket",
	"sheaf_queue_wait_duration_seconds_bucket",
	"sheaf_queue_latency_seconds_bucket",
	"sheaf_queue_retries_total",
	"sheaf_queue_dead_letters_total",
	"sheaf_queue_chunk_records_total",
	"sheaf_queue_jobs",
	"sheaf_queue_dependency_pending",
	"sheaf_batch_batches_total",
	"sheaf_batch_items_processed_total",
}

// scrape reads the metrics over HTTP, as Prometheus would, prints the
// sheaf lines (not histogram buckets), and checks that every wanted metric
// is there.
func scrape(ctx context.Context, url string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	text := string(body)
	for line := range strings.Lines(text) {
		if (strings.HasPrefix(line, "messaging_") || strings.HasPrefix(line, "sheaf_")) && !strings.Contains(line, "_bucket{") {
			fmt.Fprint(out, line)
		}
	}
	var missing []string
	for _, name := range wanted {
		if !strings.Contains(text, "\n"+name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the scrape lacks %s", strings.Join(missing, ", "))
	}
	fmt.Fprintf(out, "telemetry: scraped %d bytes; every expected metric is there\n", len(body))
	return nil
}
