package otelqueue_test

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
	"github.com/sheaf-dev/sheaf/queue/otelqueue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }

// Job kinds of the tests.
type report struct {
	County string `json:"county"`
}

func (report) Kind() string { return "report" }

type summary struct{}

func (summary) Kind() string { return "summary" }

type rows struct{ N int }

func (rows) Kind() string { return "rows" }

// harness is a test's database, registry, telemetry and what it recorded.
type harness struct {
	db       *pgtest.DB
	reg      *queue.Registry
	client   *queue.Client
	tel      *otelqueue.Telemetry
	reader   *sdkmetric.ManualReader
	recorder *tracetest.SpanRecorder
	tp       *sdktrace.TracerProvider
	events   *queuetest.Events
}

func quiet() queue.InstrumentOption { return queue.WithLogger(slog.New(slog.DiscardHandler)) }

func newHarness(t *testing.T, register func(*queue.Registry)) *harness {
	t.Helper()
	h := &harness{db: queuetest.NewDB(t), reg: queue.NewRegistry(), reader: sdkmetric.NewManualReader(),
		recorder: tracetest.NewSpanRecorder(), events: queuetest.NewEvents()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.recorder), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = h.tp.Shutdown(context.Background())
	})
	tel, err := otelqueue.New(otelqueue.WithMeterProvider(mp), otelqueue.WithTracerProvider(h.tp),
		otelqueue.WithGaugeInterval(time.Hour))
	require.NoError(t, err)
	h.tel = tel
	if register != nil {
		register(h.reg)
	}
	h.client, err = queue.NewClient(h.db.Gorm, h.reg, quiet(), tel.Option(), queue.WithObserver(h.events))
	require.NoError(t, err)
	require.NoError(t, h.client.Migrate(context.Background()))
	return h
}

func (h *harness) runner(t *testing.T, opts ...queue.RunnerOption) *queue.Runner {
	return queuetest.StartRunner(t, h.client, append([]queue.RunnerOption{queue.WithPollInterval(50 * time.Millisecond)}, opts...)...)
}

// spans returns the ended spans named name, in the order they started.
func (h *harness) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.recorder.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// metrics collects and returns the metrics by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum returns the value of counter name's data point with exactly attrs
// among its attributes (others may be there too), or of the sum of all
// when attrs is empty.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if has(dp.Attributes, attrs) {
			n += dp.Value
		}
	}
	return n
}

// histCount returns how many values histogram name recorded with attrs.
func histCount(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	var n uint64
	for _, dp := range ms[name].Data.(metricdata.Histogram[float64]).DataPoints {
		if has(dp.Attributes, attrs) {
			n += dp.Count
		}
	}
	return n
}

func has(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, a := range attrs {
		v, ok := set.Value(a.Key)
		if !ok || v != a.Value {
			return false
		}
	}
	return true
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

var (
	sys       = otelqueue.AttrSystem.String("sheaf")
	onDefault = otelqueue.AttrDestination.String(queue.DefaultQueue)
	ofReport  = otelqueue.AttrKind.String("report")
)

// A job that completes: a PRODUCER span for the enqueue, under the
// caller's span; a CONSUMER span for the attempt that links to it and
// that the handler's own spans nest under; and the counters.
func TestJobThatCompletes(t *testing.T) {
	t.Parallel()
	var inHandler trace.SpanContext
	h := newHarness(t, nil)
	require.NoError(t, queue.Register(h.reg, queue.HandlerFunc[report](func(ctx context.Context, j *queue.Job[report]) error {
		_, span := h.tp.Tracer("app").Start(ctx, "render")
		inHandler = span.SpanContext()
		span.End()
		return nil
	})))
	ctx, caller := h.tp.Tracer("app").Start(context.Background(), "request")
	res, err := h.client.Enqueue(ctx, report{County: "Travis"})
	require.NoError(t, err)
	caller.End()
	id := res.Job.ID
	h.runner(t)
	h.events.Wait(t, queue.EventCompleted, id, 1)

	prod := h.spans("enqueue default")
	require.Len(t, prod, 1)
	p := prod[0]
	require.Equal(t, trace.SpanKindProducer, p.SpanKind())
	require.Equal(t, caller.SpanContext().SpanID(), p.Parent().SpanID(), "the enqueue is part of the caller's trace")
	require.Equal(t, "sheaf", attr(p, otelqueue.AttrSystem).AsString())
	require.Equal(t, "enqueue", attr(p, otelqueue.AttrOperationName).AsString())
	require.Equal(t, "default", attr(p, otelqueue.AttrDestination).AsString())
	require.Equal(t, strconv.FormatInt(id, 10), attr(p, otelqueue.AttrMessageID).AsString())

	rec, err := h.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Contains(t, rec.Metadata["traceparent"], p.SpanContext().SpanID().String(), "the job carries the enqueue's trace context")

	cons := h.spans("process default")
	require.Len(t, cons, 1)
	c := cons[0]
	require.Equal(t, trace.SpanKindConsumer, c.SpanKind())
	require.False(t, c.Parent().IsValid(), "an attempt starts a trace of its own")
	require.Len(t, c.Links(), 1)
	require.Equal(t, p.SpanContext().TraceID(), c.Links()[0].SpanContext.TraceID())
	require.Equal(t, p.SpanContext().SpanID(), c.Links()[0].SpanContext.SpanID())
	require.Equal(t, strconv.FormatInt(id, 10), attr(c, otelqueue.AttrMessageID).AsString())
	require.Equal(t, "process", attr(c, otelqueue.AttrOperationName).AsString())
	require.Equal(t, "report", attr(c, otelqueue.AttrKind).AsString())
	require.Equal(t, int64(1), attr(c, otelqueue.AttrAttempt).AsInt64())
	require.Equal(t, attribute.EMPTY, attr(c, otelqueue.AttrOutcome).Type(), "a completed attempt says so by its status alone")
	require.Equal(t, codes.Unset, c.Status().Code)
	render := h.spans("render")
	require.Len(t, render, 1)
	require.Equal(t, c.SpanContext().SpanID(), render[0].Parent().SpanID(), "the handler's spans nest under the attempt's")
	require.Equal(t, inHandler.SpanID(), render[0].SpanContext().SpanID())

	ms := h.metrics(t)
	require.Equal(t, int64(1), sum(t, ms, "messaging.client.sent.messages", sys, onDefault, ofReport, otelqueue.AttrOperationName.String("enqueue")))
	completed := []attribute.KeyValue{sys, onDefault, ofReport, otelqueue.AttrOutcome.String("completed")}
	require.Equal(t, int64(1), sum(t, ms, "messaging.client.consumed.messages", completed...))
	require.Equal(t, uint64(1), histCount(t, ms, "messaging.process.duration", completed...))
	require.Equal(t, uint64(1), histCount(t, ms, "sheaf.queue.wait.duration", onDefault, ofReport))
	require.Equal(t, uint64(1), histCount(t, ms, "sheaf.queue.latency", completed...))
	for _, name := range []string{"sheaf.queue.retries", "sheaf.queue.dead_letters", "sheaf.queue.cancellations", "sheaf.queue.rescues"} {
		require.Zero(t, sum(t, ms, name), name)
	}
	for _, m := range ms {
		if dps, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, dp := range dps.DataPoints {
				_, hasID := dp.Attributes.Value(otelqueue.AttrMessageID)
				require.False(t, hasID, "%s carries no job ID", m.Name)
			}
		}
	}
}

// A job that fails, is retried, and fails for good: a span per attempt,
// status Error with error.type, and the retry and the dead letter counted.
func TestJobThatRetriesThenFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error {
			return errors.New("source unavailable")
		}), queue.MaxAttempts(2), queue.RetryBackoff(queue.Delays{0})))
	})
	res, err := h.client.Enqueue(context.Background(), report{})
	require.NoError(t, err)
	h.runner(t)
	h.events.Wait(t, queue.EventFailed, res.Job.ID, 1)

	cons := h.spans("process default")
	require.Len(t, cons, 2)
	for i, want := range []string{"retrying", "failed"} {
		s := cons[i]
		require.Equal(t, int64(i+1), attr(s, otelqueue.AttrAttempt).AsInt64())
		require.Equal(t, want, attr(s, otelqueue.AttrOutcome).AsString())
		require.Equal(t, codes.Error, s.Status().Code)
		require.Equal(t, "source unavailable", s.Status().Description)
		require.Equal(t, "*errors.errorString", attr(s, otelqueue.AttrErrorType).AsString())
		require.Len(t, s.Links(), 1, "each attempt links to the enqueue")
	}
	ms := h.metrics(t)
	errType := otelqueue.AttrErrorType.String("*errors.errorString")
	require.Equal(t, int64(1), sum(t, ms, "messaging.client.consumed.messages", ofReport, otelqueue.AttrOutcome.String("retrying"), errType))
	require.Equal(t, int64(1), sum(t, ms, "messaging.client.consumed.messages", ofReport, otelqueue.AttrOutcome.String("failed"), errType))
	require.Equal(t, uint64(2), histCount(t, ms, "messaging.process.duration", ofReport))
	require.Equal(t, uint64(1), histCount(t, ms, "sheaf.queue.latency", otelqueue.AttrOutcome.String("failed")), "only the last attempt ends the job")
	require.Equal(t, int64(1), sum(t, ms, "sheaf.queue.retries", onDefault, ofReport))
	require.Equal(t, int64(1), sum(t, ms, "sheaf.queue.dead_letters", onDefault, ofReport))
}

// A job cancelled while it runs.
func TestJobCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(ctx context.Context, _ *queue.Job[report]) error {
			<-ctx.Done()
			return context.Cause(ctx)
		})))
	})
	res, err := h.client.Enqueue(context.Background(), report{})
	require.NoError(t, err)
	h.runner(t)
	h.events.Wait(t, queue.EventStarted, res.Job.ID, 1)
	_, err = h.client.Cancel(context.Background(), res.Job.ID)
	require.NoError(t, err)
	h.events.Wait(t, queue.EventCancelled, res.Job.ID, 1)

	cons := h.spans("process default")
	require.Len(t, cons, 1)
	require.Equal(t, "cancelled", attr(cons[0], otelqueue.AttrOutcome).AsString())
	require.Equal(t, "cancelled", attr(cons[0], otelqueue.AttrErrorType).AsString())
	require.Equal(t, codes.Error, cons[0].Status().Code)
	ms := h.metrics(t)
	require.Equal(t, int64(1), sum(t, ms, "sheaf.queue.cancellations", onDefault, ofReport))
	require.Equal(t, uint64(1), histCount(t, ms, "sheaf.queue.latency", otelqueue.AttrOutcome.String("cancelled")))
	require.Zero(t, sum(t, ms, "sheaf.queue.dead_letters"))
}

// A job whose runner died while it ran (here: a runner of another client,
// without telemetry, whose handler hangs and whose lease is made to
// expire) is rescued by a runner with telemetry, which counts the rescue
// and runs the job again: its attempt's span links to the enqueue too.
func TestJobRescuedAfterItsRunnerDied(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	first := true
	var mu sync.Mutex
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error {
			mu.Lock()
			hang := first
			first = false
			mu.Unlock()
			if hang {
				<-release // deaf to its context, as a frozen process is
			}
			return nil
		})))
	})
	res, err := h.client.Enqueue(context.Background(), report{})
	require.NoError(t, err)
	id := res.Job.ID

	dead, err := queue.NewClient(h.db.Gorm, h.reg, quiet(), queue.WithObserver(h.events))
	require.NoError(t, err)
	// One worker, busy with the hanging attempt: it claims nothing more.
	// It leaves the maintenance to the rescuer.
	queuetest.StartRunner(t, dead, queue.WithRunnerID("dead"), queue.WithWorkers(1), queue.WithLease(time.Hour),
		queue.WithPollInterval(50*time.Millisecond), queue.WithoutMaintenance())
	t.Cleanup(func() { close(release) }) // runs before the dead runner's stop
	h.events.Wait(t, queue.EventStarted, id, 1)
	require.NoError(t, h.db.Gorm.Exec("UPDATE sheaf_jobs SET locked_until = ? WHERE id = ?",
		h.db.Time(h.db.Now(t).Add(-time.Second)), id).Error)

	h.runner(t, queue.WithRunnerID("rescuer"), queue.WithRescueInterval(20*time.Millisecond))
	h.events.Wait(t, queue.EventCompleted, id, 1)
	// The rescue is reported after its statement returns, and the job it
	// put back may be claimed and completed meanwhile: the counter is
	// added, before the test's observer hears of it, by then.
	h.events.Wait(t, queue.EventRescued, id, 1)

	ms := h.metrics(t)
	require.Equal(t, int64(1), sum(t, ms, "sheaf.queue.rescues", onDefault, ofReport))
	cons := h.spans("process default")
	require.Len(t, cons, 1, "the dead runner's attempt left no span")
	c := cons[0]
	require.Equal(t, codes.Unset, c.Status().Code, "completed")
	require.Equal(t, int64(1), attr(c, otelqueue.AttrAttempt).AsInt64(), "the rescue gave the lost attempt back")
	require.Len(t, c.Links(), 1)
	require.Equal(t, h.spans("enqueue default")[0].SpanContext().SpanID(), c.Links()[0].SpanContext.SpanID())
}

// chunked processes N records in chunks of 2, failing none.
type chunked struct{}

func (chunked) Records(_ context.Context, j *queue.Job[rows]) (int64, iter.Seq2[int, error], error) {
	return int64(j.Args.N), func(yield func(int, error) bool) {
		for i := range j.Args.N {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}
func (chunked) ProcessChunk(context.Context, *queue.Job[rows], batch.Batch[int]) error { return nil }
func (chunked) Cleanup(context.Context, *queue.Job[rows]) error                        { return nil }

// A chunked job: an event per chunk on the attempt's span, and its records
// counted.
func TestChunkedJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.RegisterChunked[rows, int](r, chunked{}, queue.ChunkSize(2), queue.OnQueue("imports")))
	})
	res, err := h.client.Enqueue(context.Background(), rows{N: 5})
	require.NoError(t, err)
	h.runner(t, queue.WithQueues("imports"))
	h.events.Wait(t, queue.EventCompleted, res.Job.ID, 1)

	cons := h.spans("process imports")
	require.Len(t, cons, 1)
	evs := cons[0].Events()
	require.Len(t, evs, 3)
	for i, want := range []int64{2, 2, 1} {
		require.Equal(t, "sheaf.chunk", evs[i].Name)
		got := map[attribute.Key]attribute.Value{}
		for _, a := range evs[i].Attributes {
			got[a.Key] = a.Value
		}
		require.Equal(t, int64(i+1), got[otelqueue.AttrChunkSeq].AsInt64())
		require.Equal(t, int64(2*i), got[otelqueue.AttrChunkOffset].AsInt64())
		require.Equal(t, want, got[otelqueue.AttrChunkRecords].AsInt64())
	}
	ms := h.metrics(t)
	require.Equal(t, int64(5), sum(t, ms, "sheaf.queue.chunk.records", otelqueue.AttrDestination.String("imports"), otelqueue.AttrKind.String("rows")))
}

// summarised registers report and summary jobs that do nothing, and a
// rule by which each report releases a summary.
func summarised(t *testing.T) func(*queue.Registry) {
	return func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
		require.NoError(t, queue.Register(r, queue.HandlerFunc[summary](func(context.Context, *queue.Job[summary]) error { return nil })))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "summarise", Parents: []string{"report"}, Each: true},
			func([]queue.JobRecord) (summary, []queue.EnqueueOption) { return summary{}, nil }))
	}
}

// A child released by a dependency rule links to the span of the attempt
// that completed its parent; EnqueueMany's span counts its jobs.
func TestDependencyChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, summarised(t))
	out, err := h.client.EnqueueMany(context.Background(), []queue.Params{{Args: report{County: "Travis"}}, {Args: report{County: "Bexar"}}})
	require.NoError(t, err)
	h.runner(t)
	h.events.Wait(t, queue.EventCompleted, 0, 4) // two parents, two children

	prod := h.spans("enqueue_many default")
	require.Len(t, prod, 1)
	require.Equal(t, int64(2), attr(prod[0], otelqueue.AttrBatchCount).AsInt64())
	ms := h.metrics(t)
	require.Equal(t, int64(2), sum(t, ms, "messaging.client.sent.messages", ofReport, otelqueue.AttrOperationName.String("enqueue_many")))

	parentSpans := map[string]trace.SpanContext{} // by job ID
	childSpans := map[int64]sdktrace.ReadOnlySpan{}
	for _, s := range h.spans("process default") {
		if attr(s, otelqueue.AttrKind).AsString() == "report" {
			parentSpans[attr(s, otelqueue.AttrMessageID).AsString()] = s.SpanContext()
		} else {
			id, err := strconv.ParseInt(attr(s, otelqueue.AttrMessageID).AsString(), 10, 64)
			require.NoError(t, err)
			childSpans[id] = s
		}
	}
	require.Len(t, parentSpans, 2)
	require.Len(t, childSpans, 2)
	for _, parent := range out {
		children, err := h.client.Children(context.Background(), parent.Job.ID)
		require.NoError(t, err)
		require.Len(t, children, 1)
		s := childSpans[children[0].ID]
		require.NotNil(t, s)
		require.Len(t, s.Links(), 1, "the child links to its parent's attempt")
		require.Equal(t, parentSpans[strconv.FormatInt(parent.Job.ID, 10)].SpanID(), s.Links()[0].SpanContext.SpanID())
	}
}

// The gauges read the database at collection time, and reuse what they
// read for the interval: a second collection reads nothing new.
func TestGauges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, summarised(t))
	stop := h.tel.Watch(h.client)
	defer stop()
	_, err := h.client.EnqueueMany(context.Background(), []queue.Params{{Args: report{}}, {Args: report{}, Options: []queue.EnqueueOption{queue.OnQueue("slow")}}})
	require.NoError(t, err)
	require.NoError(t, h.client.PauseQueue(context.Background(), "slow"))
	require.NoError(t, h.client.SetLimit(context.Background(), queue.Limit{Scope: queue.ScopeQueue, Target: "slow", Concurrency: 4}))

	gauge := func(ms map[string]metricdata.Metrics, name string, attrs ...attribute.KeyValue) int64 {
		for _, dp := range ms[name].Data.(metricdata.Gauge[int64]).DataPoints {
			if has(dp.Attributes, attrs) {
				return dp.Value
			}
		}
		t.Fatalf("no %s point with %v", name, attrs)
		return 0
	}
	queued := otelqueue.AttrStatus.String("QUEUED")
	slow := otelqueue.AttrDestination.String("slow")
	ms := h.metrics(t)
	require.Equal(t, int64(1), gauge(ms, "sheaf.queue.jobs", onDefault, queued))
	require.Equal(t, int64(0), gauge(ms, "sheaf.queue.jobs", onDefault, otelqueue.AttrStatus.String("FAILED")))
	require.Equal(t, int64(1), gauge(ms, "sheaf.queue.paused", slow))
	require.Equal(t, int64(0), gauge(ms, "sheaf.queue.paused", onDefault))
	require.Equal(t, int64(2), gauge(ms, "sheaf.queue.dependency.pending", otelqueue.AttrRule.String("summarise")))
	require.Len(t, ms["sheaf.queue.oldest_due.age"].Data.(metricdata.Gauge[float64]).DataPoints, 2)
	limit := ms["sheaf.queue.limit.use"].Data.(metricdata.Gauge[float64]).DataPoints
	require.Len(t, limit, 1)
	require.True(t, has(limit[0].Attributes, []attribute.KeyValue{otelqueue.AttrLimit.String("queue slow")}))
	require.Zero(t, limit[0].Value, "nothing runs")

	_, err = h.client.Enqueue(context.Background(), report{})
	require.NoError(t, err)
	ms = h.metrics(t)
	require.Equal(t, int64(1), gauge(ms, "sheaf.queue.jobs", onDefault, queued), "within the interval, the last read stands")

	stop()
	ms = h.metrics(t)
	_, watched := ms["sheaf.queue.jobs"]
	require.False(t, watched && len(ms["sheaf.queue.jobs"].Data.(metricdata.Gauge[int64]).DataPoints) > 0, "an unwatched client is not read")
}

// A job submitted with a trace context of its own, from a context without
// a span (as queue/console submits a request's): the enqueue joins that
// trace.
func TestTraceContextOption(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
	})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, err := h.client.EnqueueRaw(context.Background(), "report", []byte(`{}`), queue.TraceContext(tp, "congo=t61rcWkgMzE"))
	require.NoError(t, err)
	p := h.spans("enqueue default")
	require.Len(t, p, 1)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", p[0].Parent().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", p[0].Parent().SpanID().String())
	require.True(t, p[0].Parent().IsRemote())
}

// shiftedClock is the real clock moved by an offset, so that a schedule's
// next tick comes in a second.
type shiftedClock struct{ by time.Duration }

func (c shiftedClock) Now() time.Time                         { return time.Now().Add(c.by) }
func (c shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// A schedule's tick is a PRODUCER span, named for the schedule, and the
// attempts of its jobs link to it: also with the telemetry given to the
// runner alone.
func TestScheduleTick(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[summary](func(context.Context, *queue.Job[summary]) error { return nil })))
		require.NoError(t, r.Schedule(queue.Periodic{Name: "minutely", Spec: queue.Cron("* * * * *"), Grace: time.Second,
			Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: summary{}}, {Args: summary{}}} }}))
	})
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	plain, err := queue.NewClient(h.db.Gorm, h.reg, quiet(), queue.WithObserver(h.events))
	require.NoError(t, err)
	queuetest.StartRunner(t, plain, h.tel.Option(), queue.WithPollInterval(50*time.Millisecond),
		queue.WithClock(shiftedClock{by: next.Add(-2 * time.Second).Sub(now)}))
	h.events.Wait(t, queue.EventCompleted, 0, 2)
	// The tick's span ends once its transaction has; its jobs may have
	// run by then.
	var prod []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool { prod = h.spans("schedule default"); return len(prod) > 0 }, 10*time.Second, time.Millisecond)
	require.Len(t, prod, 1, "one span for the tick")
	p := prod[0]
	require.Equal(t, trace.SpanKindProducer, p.SpanKind())
	require.Equal(t, "schedule", attr(p, otelqueue.AttrOperationName).AsString())
	require.Equal(t, "minutely", attr(p, otelqueue.AttrSchedule).AsString())
	require.Equal(t, int64(2), attr(p, otelqueue.AttrBatchCount).AsInt64())
	require.Equal(t, codes.Unset, p.Status().Code)
	cons := h.spans("process default")
	require.Len(t, cons, 2)
	for _, c := range cons {
		require.Len(t, c.Links(), 1)
		require.Equal(t, p.SpanContext().SpanID(), c.Links()[0].SpanContext.SpanID(), "the job's attempt links to its tick")
	}
	ms := h.metrics(t)
	require.Equal(t, int64(2), sum(t, ms, "messaging.client.sent.messages", sys, onDefault, otelqueue.AttrKind.String("summary"),
		otelqueue.AttrOperationName.String("schedule")))
}
