// Package otelbatch reports what the batch engine of package
// github.com/sheaf-dev/sheaf/batch does as OpenTelemetry traces and metrics.
//
// It installs through the engine's observers, as one [batch.Option]:
//
//	tel, err := otelbatch.New(otelbatch.WithMeterProvider(mp), otelbatch.WithTracerProvider(tp))
//	...
//	c, err := batch.NewCoordinator(processor, tel.Option(), batch.WithMaxBatchSize(1000))
//	stop := tel.Watch(c) // optional: counts discarded items
//	defer stop()
//
// It depends only on the OpenTelemetry API; the application picks the SDK
// and exporters. Without the option the engine does no telemetry work at
// all, and the engine never imports OpenTelemetry. Observers set with
// [batch.WithObserver] keep working alongside it.
//
// # Traces
//
// Each batch becomes one span named "sheaf.batch", recorded when the batch's
// outcome is known and back-dated to the start of its first step, with
// attributes sheaf.batch.id, sheaf.batch.size (items handed to the
// processor), sheaf.batch.sub_batches (sub-batches handed to the processor)
// and sheaf.batch.outcome ("completed", "failed" or "incomplete"). Each call
// to Process adds a "sheaf.batch.sub_batch" event at the time it ended, with
// sheaf.batch.sub_batch.index, .items, .duration (seconds) and, when it
// failed, .error and error.type. A batch that fails or is left incomplete
// has span status Error, error.type and sheaf.batch.failed_seq; a batch
// that was cleaned up has a "sheaf.batch.cleanup" event, with error and
// error.type if the cleanup failed. The span has no parent: the engine's
// workers serve many producers.
//
// # Metrics
//
// All metrics are low-cardinality: no batch ID or other identifier is ever
// an attribute.
//
//   - sheaf.batch.batches (counter, {batch}): batches by sheaf.batch.outcome,
//     with error.type when not completed.
//   - sheaf.batch.sub_batch.duration (histogram, s): how long each call to
//     Process took, with error.type when it failed.
//   - sheaf.batch.items.processed (counter, {item}): items in sub-batches
//     processed successfully (cleanup may have removed them since), added
//     when their batch ends, at one measurement per batch.
//   - sheaf.batch.items.discarded (asynchronous counter, {item}): items never
//     processed because their batch failed or could not finish, read from
//     the coordinators given to [Telemetry.Watch].
//   - sheaf.batch.cleanups (counter, {cleanup}): calls to the cleanup
//     strategy's Cleanup; sheaf.batch.cleanup.failures those that failed.
//
// # error.type
//
// error.type is "panic" for a panic or runtime.Goexit, "incomplete" or
// "stopped" for a batch the coordinator's shutdown cut short, and otherwise
// the Go type of the error the processor, hook or cleanup strategy
// returned, such as "*errors.errorString".
package otelbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sheaf-dev/sheaf/batch"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/sheaf-dev/sheaf/batch/otelbatch"

// Attribute keys.
const (
	AttrBatchID         = attribute.Key("sheaf.batch.id")
	AttrBatchSize       = attribute.Key("sheaf.batch.size")
	AttrSubBatches      = attribute.Key("sheaf.batch.sub_batches")
	AttrOutcome         = attribute.Key("sheaf.batch.outcome")
	AttrFailedSeq       = attribute.Key("sheaf.batch.failed_seq")
	AttrSubBatchIndex   = attribute.Key("sheaf.batch.sub_batch.index")
	AttrSubBatchItems   = attribute.Key("sheaf.batch.sub_batch.items")
	AttrSubBatchDur     = attribute.Key("sheaf.batch.sub_batch.duration")
	AttrSubBatchError   = attribute.Key("sheaf.batch.sub_batch.error")
	AttrErrorType       = attribute.Key("error.type")
	AttrCleanupError    = attribute.Key("sheaf.batch.cleanup.error")
	spanName            = "sheaf.batch"
	subBatchEventName   = "sheaf.batch.sub_batch"
	cleanupEventName    = "sheaf.batch.cleanup"
	durationUnit        = "s"
	batchUnit           = "{batch}"
	itemUnit            = "{item}"
	cleanupUnit         = "{cleanup}"
	errorTypePanic      = "panic"
	errorTypeStopped    = "stopped"
	errorTypeIncomplete = "incomplete"
)

// durationBuckets are the histogram's bucket boundaries in seconds, those
// OpenTelemetry's conventions use for request durations.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// An Option configures [New].
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
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

// Telemetry turns a coordinator's outcomes and sub-batch results into spans
// and metrics. Create one with [New] and install it with
// [Telemetry.Option]; one Telemetry may serve several coordinators. Its
// methods are safe for concurrent use.
type Telemetry struct {
	tracer trace.Tracer

	batches         metric.Int64Counter
	subDuration     metric.Float64Histogram
	processed       metric.Int64Counter
	cleanups        metric.Int64Counter
	cleanupFailures metric.Int64Counter

	// outcomeSets holds the attribute set of each status when completed.
	outcomeSets [batch.Incomplete + 1]metric.MeasurementOption

	// pending holds, by batch ID, the sub-batch results of batches whose
	// outcome has not come yet. The engine runs one batch of an ID at a
	// time, so an ID has at most one pending batch per coordinator; ids
	// keeps coordinators apart.
	mu      sync.Mutex
	pending map[pendingKey]*pending

	watchMu  sync.Mutex
	watched  map[int]func() batch.Stats
	nextID   int
	unwatchd int64 // items discarded by coordinators no longer watched
}

type pendingKey struct {
	owner   *byte // one per Option, so per coordinator
	batchID string
}

type pending struct {
	subs []subBatch
}

// subBatch is one sub-batch result, with when it ended.
type subBatch struct {
	seq, items int
	dur        time.Duration
	err        error
	ended      time.Time
}

// pendings recycles pending records, and their slices, across batches.
var pendings = sync.Pool{New: func() any { return &pending{subs: make([]subBatch, 0, 16)} }}

// New returns telemetry that reports to the given providers. It creates the
// instruments, and returns an error if the meter refuses one.
func New(opts ...Option) (*Telemetry, error) {
	cfg := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	m := cfg.mp.Meter(ScopeName)
	t := &Telemetry{
		tracer:  cfg.tp.Tracer(ScopeName),
		pending: make(map[pendingKey]*pending),
		watched: make(map[int]func() batch.Stats),
	}
	var err, e error
	t.batches, e = m.Int64Counter("sheaf.batch.batches", metric.WithUnit(batchUnit),
		metric.WithDescription("Batches that ended, by outcome."))
	err = errors.Join(err, e)
	t.subDuration, e = m.Float64Histogram("sheaf.batch.sub_batch.duration", metric.WithUnit(durationUnit),
		metric.WithDescription("How long each call to the processor took."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	t.processed, e = m.Int64Counter("sheaf.batch.items.processed", metric.WithUnit(itemUnit),
		metric.WithDescription("Items in sub-batches processed successfully."))
	err = errors.Join(err, e)
	t.cleanups, e = m.Int64Counter("sheaf.batch.cleanups", metric.WithUnit(cleanupUnit),
		metric.WithDescription("Calls to the cleanup strategy."))
	err = errors.Join(err, e)
	t.cleanupFailures, e = m.Int64Counter("sheaf.batch.cleanup.failures", metric.WithUnit(cleanupUnit),
		metric.WithDescription("Calls to the cleanup strategy that failed."))
	err = errors.Join(err, e)
	_, e = m.Int64ObservableCounter("sheaf.batch.items.discarded", metric.WithUnit(itemUnit),
		metric.WithDescription("Items never processed because their batch failed or could not finish."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.discarded())
			return nil
		}))
	err = errors.Join(err, e)
	if err != nil {
		return nil, fmt.Errorf("otelbatch: %w", err)
	}
	for _, s := range []batch.Status{batch.Completed, batch.Failed, batch.Incomplete} {
		t.outcomeSets[s] = metric.WithAttributeSet(attribute.NewSet(AttrOutcome.String(s.String())))
	}
	return t, nil
}

// Option returns the batch option that installs the telemetry on a
// coordinator: an outcome observer and a sub-batch observer, added to any
// the application sets. Use a fresh Option for each coordinator.
func (t *Telemetry) Option() batch.Option {
	owner := new(byte)
	return batch.Options(
		batch.WithSubBatchObserver(func(r batch.SubBatchResult) { t.subBatch(owner, r) }),
		batch.WithObserver(func(o batch.Outcome) { t.outcome(owner, o) }),
	)
}

// Watch makes the sheaf.batch.items.discarded counter include the items
// s discards, read from s.Stats() at each collection; s is usually a
// *batch.Coordinator. The returned function stops watching; the items
// counted so far stay counted.
func (t *Telemetry) Watch(s interface{ Stats() batch.Stats }) (stop func()) {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	id := t.nextID
	t.nextID++
	t.watched[id] = s.Stats
	var once sync.Once
	return func() {
		once.Do(func() {
			t.watchMu.Lock()
			defer t.watchMu.Unlock()
			t.unwatchd += s.Stats().ItemsDiscarded
			delete(t.watched, id)
		})
	}
}

func (t *Telemetry) discarded() int64 {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	n := t.unwatchd
	for _, stats := range t.watched {
		n += stats().ItemsDiscarded
	}
	return n
}

func (t *Telemetry) subBatch(owner *byte, r batch.SubBatchResult) {
	ctx := context.Background()
	if r.Err == nil {
		t.subDuration.Record(ctx, r.Duration.Seconds())
	} else {
		t.subDuration.Record(ctx, r.Duration.Seconds(), metric.WithAttributes(AttrErrorType.String(errorType(r.Err))))
	}
	sb := subBatch{seq: r.Seq, items: r.Items, dur: r.Duration, err: r.Err, ended: time.Now()}
	k := pendingKey{owner, r.BatchID}
	t.mu.Lock()
	p := t.pending[k]
	if p == nil {
		p = pendings.Get().(*pending)
		t.pending[k] = p
	}
	p.subs = append(p.subs, sb)
	t.mu.Unlock()
}

func (t *Telemetry) outcome(owner *byte, o batch.Outcome) {
	end := time.Now()
	ctx := context.Background()
	k := pendingKey{owner, o.BatchID}
	t.mu.Lock()
	p := t.pending[k]
	delete(t.pending, k)
	t.mu.Unlock()
	if p == nil {
		p = pendings.Get().(*pending)
	}
	defer func() {
		clear(p.subs) // drop the errors
		p.subs = p.subs[:0]
		pendings.Put(p)
	}()

	var errType string
	if o.Status != batch.Completed {
		errType = errorType(o.Err)
	}
	if errType == "" && int(o.Status) < len(t.outcomeSets) && t.outcomeSets[o.Status] != nil {
		t.batches.Add(ctx, 1, t.outcomeSets[o.Status])
	} else {
		t.batches.Add(ctx, 1, metric.WithAttributes(AttrOutcome.String(o.Status.String()), AttrErrorType.String(errType)))
	}
	if o.CleanedUp {
		t.cleanups.Add(ctx, 1)
		if o.CleanupErr != nil {
			t.cleanupFailures.Add(ctx, 1, metric.WithAttributes(AttrErrorType.String(errorType(o.CleanupErr))))
		}
	}

	var size, processed int64
	for _, r := range p.subs {
		size += int64(r.items)
		if r.err == nil {
			processed += int64(r.items)
		}
	}
	if processed > 0 {
		t.processed.Add(ctx, processed)
	}
	_, span := t.tracer.Start(ctx, spanName,
		trace.WithTimestamp(end.Add(-o.Duration)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			AttrBatchID.String(o.BatchID),
			AttrBatchSize.Int64(size),
			AttrSubBatches.Int(len(p.subs)),
			AttrOutcome.String(o.Status.String()),
		))
	if !span.IsRecording() {
		span.End()
		return
	}
	for _, r := range p.subs {
		attrs := make([]attribute.KeyValue, 3, 5)
		attrs[0] = AttrSubBatchIndex.Int(r.seq)
		attrs[1] = AttrSubBatchItems.Int(r.items)
		attrs[2] = AttrSubBatchDur.Float64(r.dur.Seconds())
		if r.err != nil {
			attrs = append(attrs, AttrSubBatchError.String(r.err.Error()), AttrErrorType.String(errorType(r.err)))
		}
		span.AddEvent(subBatchEventName, trace.WithTimestamp(r.ended), trace.WithAttributes(attrs...))
	}
	if o.CleanedUp {
		var attrs []attribute.KeyValue
		if o.CleanupErr != nil {
			attrs = append(attrs, AttrCleanupError.String(o.CleanupErr.Error()), AttrErrorType.String(errorType(o.CleanupErr)))
		}
		span.AddEvent(cleanupEventName, trace.WithTimestamp(end), trace.WithAttributes(attrs...))
	}
	if o.Status != batch.Completed {
		span.SetAttributes(AttrErrorType.String(errType), AttrFailedSeq.Int(o.Seq))
		msg := o.Status.String()
		if o.Err != nil {
			msg = o.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(end))
}

// errorType is the low-cardinality name of err: see the package's
// documentation.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	var pe *batch.PanicError
	switch {
	case errors.As(err, &pe):
		return errorTypePanic
	case errors.Is(err, batch.ErrStopped):
		return errorTypeStopped
	case errors.Is(err, batch.ErrIncomplete):
		return errorTypeIncomplete
	}
	var proc *batch.ProcessError
	if errors.As(err, &proc) && proc.Err != nil {
		err = proc.Err
	}
	return fmt.Sprintf("%T", err)
}
