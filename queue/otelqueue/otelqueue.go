package otelqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/worker"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/sheaf-dev/sheaf/queue/otelqueue"

// System is the value of messaging.system.
const System = "sheaf"

// Attribute keys: the OpenTelemetry messaging conventions' and sheaf's own.
const (
	AttrSystem        = attribute.Key("messaging.system")
	AttrOperationName = attribute.Key("messaging.operation.name")
	AttrOperationType = attribute.Key("messaging.operation.type")
	AttrDestination   = attribute.Key("messaging.destination.name")
	AttrMessageID     = attribute.Key("messaging.message.id")
	AttrBatchCount    = attribute.Key("messaging.batch.message_count")
	AttrErrorType     = attribute.Key("error.type")
	AttrKind          = attribute.Key("sheaf.job.kind")
	AttrAttempt       = attribute.Key("sheaf.job.attempt")
	AttrOutcome       = attribute.Key("sheaf.job.outcome")
	AttrStatus        = attribute.Key("sheaf.job.status")
	AttrChunkSeq      = attribute.Key("sheaf.chunk.seq")
	AttrChunkOffset   = attribute.Key("sheaf.chunk.offset")
	AttrChunkRecords  = attribute.Key("sheaf.chunk.records")
	AttrChunkDuration = attribute.Key("sheaf.chunk.duration")
	AttrRule          = attribute.Key("sheaf.rule")
	AttrSchedule      = attribute.Key("sheaf.schedule")
	// AttrLimit names a limit across the runners: its scope and target,
	// as "kind report".
	AttrLimit = attribute.Key("sheaf.limit")
)

// Operation names (messaging.operation.name).
const (
	OpProcess = "process"
	// The enqueue operations are those of queue.EnqueueCall: "enqueue",
	// "enqueue_many" and "enqueue_bulk".
)

// MetaParents is the metadata key under which a dependency child keeps
// the W3C traceparents of its parents' spans, separated by spaces.
// otelqueue stores nothing else with jobs but the traceparent and
// tracestate of the span that enqueued them.
const MetaParents = "sheaf.parents"

const (
	chunkEventName = "sheaf.chunk"
	durationUnit   = "s"
	errorTypePanic = "panic"
)

// durationBuckets are the histograms' bucket boundaries in seconds: those
// OpenTelemetry's conventions use for request durations, and longer ones,
// since jobs and their waits can take minutes.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300, 900, 3600}

// DefaultGaugeInterval is how long the gauges reuse what they read from
// the database, by default.
const DefaultGaugeInterval = 15 * time.Second

// An Option configures [New].
type Option func(*config)

type config struct {
	mp       metric.MeterProvider
	tp       trace.TracerProvider
	prop     propagation.TextMapPropagator
	interval time.Duration
}

// WithMeterProvider sets the meter provider. Default: the global one,
// otel.GetMeterProvider. A nil provider keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithTracerProvider sets the tracer provider. Default: the global one,
// otel.GetTracerProvider. A nil provider keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithPropagator sets how trace context is written into and read from a
// job's metadata. Default: W3C trace context (propagation.TraceContext),
// whatever the global propagator is, since the console and other sheaf
// processes read and write traceparent. A nil propagator keeps the default.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.prop = p
		}
	}
}

// WithGaugeInterval sets how long the gauges of [Telemetry.Watch] reuse
// what they last read from the database: collections within that time
// after a read read nothing. Default DefaultGaugeInterval; values below
// one second are taken as one second.
func WithGaugeInterval(d time.Duration) Option {
	return func(c *config) { c.interval = max(d, time.Second) }
}

// Telemetry turns a queue's enqueues, attempts and events into spans and
// metrics. Create one with [New], install it with [Telemetry.Option], and
// call [Telemetry.Watch] for the gauges. One Telemetry may serve several
// clients and runners; its methods are safe for concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	w3c    bool // prop is W3C trace context, which extract reads by hand
	meter  metric.Meter

	sent                                      metric.Int64Counter
	consumed                                  metric.Int64ObservableCounter
	processDuration, waitDuration, latency    metric.Float64Histogram
	retries, rescues, leasesLost, deadLetters metric.Int64Counter
	cancellations, chunkRecords               metric.Int64Counter

	// sets caches the attribute sets of measurements by what they vary
	// with, so a measurement allocates nothing once its set is known.
	sets  sync.Map // setKey → metric.MeasurementOption
	kinds sync.Map // setKey of a queue and kind → *kindTel
	// counts holds the consumed counter's values by attribute set: an
	// attempt adds to one in memory, and a collection reads them all,
	// which costs an attempt far less than a measurement.
	counts sync.Map // setKey → *count

	gauges gauges
}

// New returns telemetry that reports to the given providers. It creates the
// instruments, and returns an error if the meter refuses one.
func New(opts ...Option) (*Telemetry, error) {
	cfg := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider(), prop: propagation.TraceContext{},
		interval: DefaultGaugeInterval}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	m := cfg.mp.Meter(ScopeName)
	_, w3c := cfg.prop.(propagation.TraceContext)
	t := &Telemetry{tracer: cfg.tp.Tracer(ScopeName), prop: cfg.prop, w3c: w3c, meter: m}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(durationUnit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	t.sent = counter("messaging.client.sent.messages", "{message}", "Jobs enqueued, by kind and queue.")
	var err error
	t.consumed, err = m.Int64ObservableCounter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Attempts whose handler returned, by kind, queue and outcome."),
		metric.WithInt64Callback(t.observeConsumed))
	errs = append(errs, err)
	t.processDuration = histogram("messaging.process.duration", "How long each attempt's handler ran, by kind, queue and outcome.")
	t.waitDuration = histogram("sheaf.queue.wait.duration", "How long jobs waited from due to started, by kind and queue.")
	t.latency = histogram("sheaf.queue.latency", "How long jobs took from created to finished (completed, failed or cancelled), by kind, queue and outcome.")
	t.retries = counter("sheaf.queue.retries", "{attempt}", "Attempts that failed and will be retried.")
	t.rescues = counter("sheaf.queue.rescues", "{job}", "Jobs rescued from an expired lease (their runner died or froze).")
	t.leasesLost = counter("sheaf.queue.leases.lost", "{attempt}", "Attempts whose result was dropped because the job was no longer the runner's.")
	t.deadLetters = counter("sheaf.queue.dead_letters", "{job}", "Jobs that failed for good.")
	t.cancellations = counter("sheaf.queue.cancellations", "{job}", "Running jobs stopped by a cancel.")
	t.chunkRecords = counter("sheaf.queue.chunk.records", "{record}", "Records in chunks of chunked jobs processed successfully.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelqueue: %w", err)
	}
	if err := t.gauges.init(m, cfg.interval); err != nil {
		return nil, fmt.Errorf("otelqueue: %w", err)
	}
	return t, nil
}

// Option returns the queue option that installs the telemetry: give it to
// queue.NewClient, and the client's runners have it too (giving it to a
// runner of such a client as well would count everything twice). Giving it
// to a runner alone traces its attempts and its schedules' ticks, but not
// enqueues.
func (t *Telemetry) Option() queue.InstrumentOption {
	return queue.WithHooks(queue.Hooks{
		Enqueue: t.enqueue,
		Attempt: t.attempt,
		Chunk:   t.chunk,
		Release: t.release,
		Observe: t.observe,
	})
}

// setKey is what a cached attribute set varies with.
type setKey struct {
	metric       int
	kind, queue  string
	outcome, typ string
}

const (
	setSent = iota
	setProcess
	setWait
	setEvent
)

// set returns the measurement option of k, building it once.
func (t *Telemetry) set(k setKey) metric.MeasurementOption {
	if o, ok := t.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{AttrSystem.String(System), AttrDestination.String(k.queue), AttrKind.String(k.kind)}
	switch k.metric {
	case setSent:
		attrs = append(attrs, AttrOperationName.String(k.outcome))
	case setProcess:
		attrs = append(attrs, AttrOperationName.String(OpProcess), AttrOutcome.String(k.outcome))
	}
	if k.typ != "" {
		attrs = append(attrs, AttrErrorType.String(k.typ))
	}
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	t.sets.Store(k, o)
	return o
}

// enqueue is the Enqueue hook: a PRODUCER span per call, whose context is
// stored with every job of the call.
func (t *Telemetry) enqueue(ctx context.Context, call *queue.EnqueueCall) (context.Context, func(queue.EnqueueResult)) {
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && len(call.Jobs) > 0 && call.Jobs[0].Metadata["traceparent"] != "" {
		// A job submitted with the caller's trace context (the console's
		// jobs): the enqueue joins the caller's trace.
		parent = t.prop.Extract(ctx, propagation.MapCarrier(call.Jobs[0].Metadata))
	}
	dest := commonQueue(call.Jobs)
	name := call.Operation
	if dest != "" {
		name += " " + dest
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, AttrSystem.String(System), AttrOperationName.String(call.Operation), AttrOperationType.String("send"))
	if dest != "" {
		attrs = append(attrs, AttrDestination.String(dest))
	}
	if call.Operation != "enqueue" {
		attrs = append(attrs, AttrBatchCount.Int(len(call.Jobs)))
	}
	if call.Schedule != "" {
		attrs = append(attrs, AttrSchedule.String(call.Schedule))
	}
	ctx, span := t.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	if span.SpanContext().IsValid() {
		carrier := propagation.MapCarrier{}
		t.prop.Inject(ctx, carrier)
		call.Metadata = carrier
	}
	jobs, op := call.Jobs, call.Operation
	return ctx, func(res queue.EnqueueResult) {
		typ := ""
		if res.Err != nil {
			typ = errorType(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
			span.SetAttributes(AttrErrorType.String(typ))
		} else if len(res.Enqueued) == 1 && res.Enqueued[0].Job != nil {
			span.SetAttributes(AttrMessageID.String(strconv.FormatInt(res.Enqueued[0].Job.ID, 10)))
		}
		// Counted before the span ends: whoever sees the span ended sees
		// the jobs counted too.
		t.countSent(ctx, op, jobs, typ)
		span.End()
	}
}

// countSent adds the jobs to the sent counter, one measurement per run of
// jobs of one kind and queue.
func (t *Telemetry) countSent(ctx context.Context, op string, jobs []queue.EnqueueJob, typ string) {
	for i := 0; i < len(jobs); {
		j := i + 1
		for j < len(jobs) && jobs[j].Kind == jobs[i].Kind && jobs[j].Queue == jobs[i].Queue {
			j++
		}
		t.sent.Add(ctx, int64(j-i), t.set(setKey{metric: setSent, kind: jobs[i].Kind, queue: jobs[i].Queue, outcome: op, typ: typ}))
		i = j
	}
}

// commonQueue is the queue of every job, or "" if they have several.
func commonQueue(jobs []queue.EnqueueJob) string {
	if len(jobs) == 0 {
		return ""
	}
	q := jobs[0].Queue
	for _, j := range jobs[1:] {
		if j.Queue != q {
			return ""
		}
	}
	return q
}

// attempt is the Attempt hook: a CONSUMER span per attempt, linked to the
// span that enqueued the job (or, for a dependency child, its parents').
func (t *Telemetry) attempt(ctx context.Context, job *queue.JobRecord) (context.Context, func(queue.Event)) {
	// Measurements take the worker's context, not the span's: exemplars of
	// a span per job would cost more than the rest of the telemetry.
	mctx := ctx
	var started time.Time
	if job.StartedAt != nil {
		started = *job.StartedAt
	} else {
		started = time.Now()
	}
	kt := t.kindOf(job.Queue, job.Kind)
	t.waitDuration.Record(mctx, max(started.Sub(job.RunAt), 0).Seconds(), kt.wait)

	// The span's attributes and links are set once it has started, not
	// given to Start, which would copy them once more: a sampler decides
	// on the span's name (the queue's), kind and parent.
	parent := ctx // which, unlike the span's, extract may hand back as it is
	ctx, span := t.tracer.Start(ctx, kt.name, consumerKind...)
	buf := attrBufs.Get().(*[]attribute.KeyValue)
	attrs := append((*buf)[:0],
		AttrSystem.String(System),
		AttrOperationName.String(OpProcess),
		AttrOperationType.String(OpProcess),
		AttrDestination.String(job.Queue),
		AttrMessageID.String(strconv.FormatInt(job.ID, 10)),
		AttrKind.String(job.Kind),
		AttrAttempt.Int(job.Attempts))
	span.SetAttributes(attrs...) // which copies them, so the buffer serves the next attempt
	clear(attrs)
	*buf = attrs
	attrBufs.Put(buf)
	t.link(parent, span, job.Metadata)
	created := job.CreatedAt
	return ctx, func(ev queue.Event) {
		outcome, typ := outcomeOf(ev)
		if typ != "" {
			// Only an attempt that did not complete gets attributes at its
			// end: growing a span's attributes costs more than the rest
			// of its span, and a completed one says so by its Unset
			// status.
			msg := outcome
			if ev.Err != nil {
				msg = ev.Err.Error()
			}
			span.SetStatus(codes.Error, msg)
			span.SetAttributes(AttrOutcome.String(outcome), AttrErrorType.String(typ))
		}
		n := kt.completed
		if ev.Type != queue.EventCompleted {
			n = t.count(setKey{metric: setProcess, kind: ev.Kind, queue: ev.Queue, outcome: outcome, typ: typ})
		}
		n.n.Add(1)
		set := n.set
		t.processDuration.Record(mctx, ev.Duration.Seconds(), set)
		switch ev.Type {
		case queue.EventCompleted, queue.EventFailed, queue.EventCancelled:
			t.latency.Record(mctx, max(time.Since(created), 0).Seconds(), set)
		}
		span.End() // last, as the enqueue's: an ended span's attempt is counted
	}
}

// kindTel is what the attempts of one kind on one queue share: their
// span name, the attribute set of their wait, and the count (and so the
// attribute set) of their completions.
type kindTel struct {
	name      string
	wait      metric.MeasurementOption
	completed *count
}

// consumerKind starts an attempt's span; a variable, so that starting one
// allocates no options.
var consumerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// count is a value of the consumed counter: how many attempts ended with
// one attribute set.
type count struct {
	n   atomic.Int64
	set metric.MeasurementOption
}

// count returns the count of the attribute set of k, creating it once.
func (t *Telemetry) count(k setKey) *count {
	if c, ok := t.counts.Load(k); ok {
		return c.(*count)
	}
	c, _ := t.counts.LoadOrStore(k, &count{set: t.set(k)})
	return c.(*count)
}

// observeConsumed reports the consumed counter's values at a collection.
func (t *Telemetry) observeConsumed(_ context.Context, o metric.Int64Observer) error {
	t.counts.Range(func(_, v any) bool {
		c := v.(*count)
		o.Observe(c.n.Load(), c.set)
		return true
	})
	return nil
}

// kindOf returns the kindTel of kind on queue q, building it once: one
// lookup per attempt instead of one per measurement.
func (t *Telemetry) kindOf(q, kind string) *kindTel {
	k := setKey{queue: q, kind: kind}
	if kt, ok := t.kinds.Load(k); ok {
		return kt.(*kindTel)
	}
	outcome, _ := outcomeOf(queue.Event{Type: queue.EventCompleted})
	kt := &kindTel{name: OpProcess + " " + q,
		wait:      t.set(setKey{metric: setWait, kind: kind, queue: q}),
		completed: t.count(setKey{metric: setProcess, kind: kind, queue: q, outcome: outcome})}
	t.kinds.Store(k, kt)
	return kt
}

// attrBufs holds the buffers attempt builds a span's attributes in.
var attrBufs = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 8)
	return &b
}}

// link links an attempt's span to the span that enqueued the job, and to
// the spans of a dependency child's parents.
func (t *Telemetry) link(ctx context.Context, span trace.Span, meta map[string]string) {
	if len(meta) == 0 {
		return
	}
	if sc := t.extract(ctx, meta); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
	for _, tp := range strings.Fields(meta[MetaParents]) {
		if sc := parseTraceparent(tp, ""); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// traceparent writes sc as a W3C traceparent.
func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// extract reads the span context a job's metadata carries: by hand when
// the propagator is W3C's, which saves the contexts Extract builds on
// every attempt.
func (t *Telemetry) extract(ctx context.Context, meta map[string]string) trace.SpanContext {
	tp := meta["traceparent"]
	switch {
	case tp == "":
		return trace.SpanContext{}
	case t.w3c:
		return parseTraceparent(tp, meta["tracestate"])
	}
	return trace.SpanContextFromContext(t.prop.Extract(ctx, propagation.MapCarrier(meta)))
}

// parseTraceparent reads a W3C traceparent header, and tracestate if it is
// valid, as propagation.TraceContext does; it returns an invalid span
// context for a header that is not one.
func parseTraceparent(tp, state string) trace.SpanContext {
	// version-traceid-spanid-flags, each lowercase hex: 2-32-16-2. A later
	// version may append fields after another dash; version ff is invalid.
	const size = 55
	if len(tp) < size || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || !lowerHex(tp[:size]) ||
		tp[:2] == "ff" || (tp[:2] == "00" && len(tp) != size) || (len(tp) > size && tp[size] != '-') {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}
	}
	flags, err := strconv.ParseUint(tp[53:55], 16, 8)
	if err != nil {
		return trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true}
	if state != "" {
		if ts, err := trace.ParseTraceState(state); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg)
}

// lowerHex reports whether s is lowercase hex digits and dashes.
func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != '-' {
			return false
		}
	}
	return true
}

// outcomeOf names how an attempt ended, and its error.type: empty when it
// completed.
func outcomeOf(ev queue.Event) (outcome, typ string) {
	switch ev.Type {
	case queue.EventCompleted:
		return "completed", ""
	case queue.EventRetrying:
		return "retrying", errorType(ev.Err)
	case queue.EventFailed:
		return "failed", errorType(ev.Err)
	case queue.EventCancelled:
		return "cancelled", "cancelled"
	case queue.EventRequeued:
		return "requeued", "stopped"
	case queue.EventRejected:
		return "rejected", "lease_lost"
	}
	return ev.Type.String(), errorType(ev.Err)
}

// chunk is the Chunk hook: an event on the attempt's span, and the records.
func (t *Telemetry) chunk(ctx context.Context, c queue.ChunkInfo) {
	if c.Err == nil {
		t.chunkRecords.Add(ctx, int64(c.Records), t.set(setKey{metric: setEvent, kind: c.Kind, queue: c.Queue}))
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		AttrChunkSeq.Int(c.Seq), AttrChunkOffset.Int64(c.Offset), AttrChunkRecords.Int(c.Records),
		AttrChunkDuration.Float64(c.Duration.Seconds()),
	}
	if c.Err != nil {
		attrs = append(attrs, AttrErrorType.String(errorType(c.Err)), attribute.String("exception.message", c.Err.Error()))
	}
	span.AddEvent(chunkEventName, trace.WithAttributes(attrs...))
}

// release is the Release hook: a child keeps its parents' span contexts:
// that of the attempt that completed the last parent, and those that
// enqueued the others.
func (t *Telemetry) release(ctx context.Context, completed *queue.JobRecord, parents []queue.JobRecord) map[string]string {
	var tps []string
	for _, p := range parents {
		if sc := trace.SpanContextFromContext(ctx); p.ID == completed.ID && sc.IsValid() {
			tps = append(tps, traceparent(sc))
		} else if tp := p.Metadata["traceparent"]; tp != "" {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		return nil
	}
	return map[string]string{MetaParents: strings.Join(tps, " ")}
}

// observe is the Observe hook: the counters of what the database
// confirmed.
func (t *Telemetry) observe(ev queue.Event) {
	var c metric.Int64Counter
	switch ev.Type {
	case queue.EventRetrying:
		c = t.retries
	case queue.EventRescued:
		c = t.rescues
	case queue.EventRejected:
		c = t.leasesLost
	case queue.EventFailed:
		c = t.deadLetters
	case queue.EventCancelled:
		c = t.cancellations
	default:
		return
	}
	c.Add(context.Background(), 1, t.set(setKey{metric: setEvent, kind: ev.Kind, queue: ev.Queue}))
}

// errorType is the low-cardinality name of err: see the package's
// documentation.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	var pe *worker.PanicError
	switch {
	case errors.As(err, &pe):
		return errorTypePanic
	case errors.Is(err, queue.ErrTimeout):
		return "timeout"
	case errors.Is(err, queue.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, queue.ErrCancelled):
		return "cancelled"
	case errors.Is(err, queue.ErrStopping):
		return "stopped"
	}
	for {
		var perm *queue.PermanentError
		if !errors.As(err, &perm) || perm.Err == nil {
			break
		}
		err = perm.Err
	}
	return fmt.Sprintf("%T", err)
}
