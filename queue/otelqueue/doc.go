// Package otelqueue reports what the job queue of package
// github.com/sheaf-dev/sheaf/queue does as OpenTelemetry traces and
// metrics.
//
// It installs through the queue's hooks (queue.WithHooks), as one
// [queue.InstrumentOption] given to the client; the client's runners inherit it:
//
//	tel, err := otelqueue.New(otelqueue.WithMeterProvider(mp), otelqueue.WithTracerProvider(tp))
//	...
//	client, err := queue.NewClient(db, reg, tel.Option())
//	stop := tel.Watch(client) // optional: gauges read from the database
//	defer stop()
//	runner, err := queue.NewRunner(client)
//
// It depends only on the OpenTelemetry API; the application picks the SDK
// and exporters. Without the option the queue does no telemetry work, and
// the queue never imports OpenTelemetry. Observers set with
// queue.WithObserver keep working alongside it. Package
// github.com/sheaf-dev/sheaf/batch/otelbatch does the same for the batch
// engine.
//
// # Traces
//
// Spans follow OpenTelemetry's messaging conventions, with
// messaging.system "sheaf", messaging.destination.name the queue and
// messaging.message.id the job ID.
//
// Each call to Enqueue, EnqueueRaw, EnqueueMany or EnqueueBulk is a
// PRODUCER span named after its operation and queue ("enqueue reports"),
// with messaging.operation.name "enqueue", "enqueue_many" or
// "enqueue_bulk", messaging.operation.type "send", the job ID when the call
// enqueued one job, and messaging.batch.message_count for the others. A
// schedule's tick is one too, "schedule <queue>", with operation "schedule"
// and sheaf.schedule the schedule's name; it ends once the transaction that
// spends the tick has; the runner's hooks make it, so telemetry given to a
// runner alone has it too. The span's W3C trace context is stored with each
// job, in the job's metadata (queue.JobRecord.Metadata), where a traceparent
// takes 26 bytes (schema version 7's meta column); jobs enqueued before
// version 7 keep theirs in version 6's metadata column, which claims and
// reads still read, so the upgrade rewrites no row. A job submitted
// with a trace context of its own (queue.TraceContext, as queue/console
// does with a request's traceparent header) from a context without a span
// gets a producer span in that trace.
//
// Each attempt is a CONSUMER span, "process <queue>", started as the
// attempt begins and ended when its handler returns, with
// messaging.operation.name "process", messaging.message.id, sheaf.job.kind,
// and sheaf.job.attempt. These attributes and the links below are set as
// soon as the span has started rather than given to Start, which saves the
// SDK a copy of each: a head sampler decides on the span's name, kind and
// parent alone. An attempt that completed leaves its status Unset; one that
// did not has status Error, error.type, and sheaf.job.outcome ("retrying",
// "failed", "cancelled", "requeued" when the runner stopped, or "rejected"
// when the attempt lost its lease). The span ends as the handler returns,
// before the result is written: a result the database then refuses, because
// another runner holds the job by now, is counted by
// sheaf.queue.leases.lost, not on the span. The span starts a trace of its
// own and links to the span that enqueued the job; the handler's context
// carries it, so the handler's own spans are its children. A chunked job's
// span has a "sheaf.chunk" event per chunk (sheaf.chunk.seq, .offset,
// .records, .duration, and error.type if the chunk failed). A child
// released by a dependency rule links to its parents' spans: to the span of
// the attempt that completed the last parent, which released it, and to the
// spans that enqueued the others.
//
// # Metrics
//
// No metric carries a job ID or any other unbounded value. Attributes are
// messaging.system, messaging.destination.name (the queue) and
// sheaf.job.kind, and, where said, messaging.operation.name,
// sheaf.job.outcome and error.type.
//
//   - messaging.client.sent.messages (counter, {message}): jobs enqueued,
//     by operation ("schedule" for a schedule's ticks); with error.type
//     when the call failed.
//   - messaging.client.consumed.messages (counter, {message}): attempts
//     whose handler returned, by outcome. An asynchronous counter: each
//     attempt adds to a count in memory and a collection reads the counts,
//     which costs an attempt less than a measurement.
//   - messaging.process.duration (histogram, s): how long each attempt's
//     handler ran, by outcome.
//   - sheaf.queue.wait.duration (histogram, s): from when a job was due
//     to when its attempt started.
//   - sheaf.queue.latency (histogram, s): from when a job was created to
//     when its last attempt's handler returned, for attempts that
//     completed, failed for good or were cancelled, by outcome.
//   - sheaf.queue.retries, sheaf.queue.rescues, sheaf.queue.leases.lost,
//     sheaf.queue.dead_letters, sheaf.queue.cancellations (counters): the
//     queue's events EventRetrying, EventRescued, EventRejected,
//     EventFailed and EventCancelled, counted once the database has them.
//   - sheaf.queue.chunk.records (counter, {record}): records in chunks of
//     chunked jobs processed successfully.
//
// The gauges of [Telemetry.Watch] read the database when the meter
// collects, at most once per WithGaugeInterval: sheaf.queue.jobs (by
// queue and sheaf.job.status), sheaf.queue.oldest_due.age (s, by queue),
// sheaf.queue.paused (by queue), sheaf.queue.dependency.pending (by
// sheaf.rule), sheaf.queue.schedule.missed_ticks (by sheaf.schedule) and
// sheaf.queue.limit.use (by sheaf.limit: how much of each limit across the
// runners is used, 1 when it holds jobs back).
//
// # error.type
//
// error.type is "panic" for a handler that panicked, "timeout" for one
// that outlived its kind's Timeout, "cancelled", "lease_lost" and
// "stopped" for attempts cut short by a cancel, a lost lease or a runner
// that stopped, and otherwise the Go type of the handler's error (of the
// error inside a queue.Permanent), such as "*errors.errorString".
//
// # Cost
//
// Per job: a share of its enqueue call's span, one span per attempt, its
// trace context stored in the job's row, three measurements with cached
// attribute sets, and an atomic addition. Measurements take the worker's
// context, not the attempt span's, so they carry no exemplars: looking for
// one on every job would cost more than the measurement.
// BenchmarkAttemptHook measures an attempt's share, BenchmarkOverhead the
// whole, end to end; examples/BENCHMARKS.md has their figures and how to
// run them.
//
// # Prometheus
//
// The program in examples/telemetry works jobs and a batch with otelqueue
// and otelbatch installed, and serves /metrics through the OpenTelemetry
// Prometheus exporter; its README shows a scrape and a trace.
package otelqueue
