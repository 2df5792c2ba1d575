package queue

import (
	"context"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/enqueue"
	"github.com/sheaf-dev/sheaf/queue/internal/hook"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Hooks are callbacks into a client's enqueues and a runner's attempts, for
// instrumentation such as package queue/otelqueue's; install them with
// WithHooks. Every field may be nil; without hooks none of this work is
// done. They are called on the goroutines that enqueue and run jobs, so
// they must be quick and safe for concurrent use, and they are trusted: a
// panic in Enqueue, Attempt, Chunk or Release is not recovered (one in
// Observe is, as an observer's).
type Hooks struct {
	// Enqueue is called as an enqueue call begins, once its jobs are
	// valid, and, for a runner's hooks, as a schedule's tick enqueues its
	// jobs in the transaction that spends the tick (the result comes once
	// that transaction has ended). It may set call.Metadata, stored with
	// each job over the job's own keys, and returns the context to insert
	// the jobs with and a function called once with the call's result.
	Enqueue func(ctx context.Context, call *EnqueueCall) (context.Context, func(EnqueueResult))
	// Attempt is called on the worker's goroutine as an attempt begins,
	// after EventStarted, with the job as claimed (not to be modified: jobs
	// of one enqueue call may share its Metadata). It returns the context
	// to hand the handler and a function called once when the handler has
	// returned, with the event the runner is about to report (completed,
	// retrying, failed, cancelled, requeued, or rejected for an attempt
	// that lost its lease). The database may still refuse a result whose
	// claim is gone; Observe then sees EventRejected.
	Attempt func(ctx context.Context, job *JobRecord) (context.Context, func(Event))
	// Chunk is called after each chunk of a chunked job (RegisterChunked)
	// has been processed, with the handler's context.
	Chunk func(ctx context.Context, c ChunkInfo)
	// Release is called as a dependency rule builds a child from its
	// completed parents, on the runner that completed the last of them,
	// with the context Attempt returned for that attempt (Background
	// without an Attempt hook). What it returns is the child's metadata.
	Release func(ctx context.Context, completed *JobRecord, parents []JobRecord) map[string]string
	// Observe receives every job event, before the Observer set with
	// WithObserver, which then finds what the hooks record recorded.
	Observe func(Event)
}

// WithHooks adds hooks (client or runner). Hooks add up: a runner has its
// client's and its own, and each call adds one set. A client calls Enqueue;
// a runner calls them all.
func WithHooks(h Hooks) InstrumentOption {
	return InstrumentOption{func(c *config) error {
		// Clip: a runner's hooks must not write into its client's array.
		c.hooks = append(slices.Clip(c.hooks), h)
		return nil
	}}
}

// EnqueueCall describes an enqueue call to Hooks.Enqueue.
type EnqueueCall struct {
	// Operation names the method: "enqueue" (Enqueue and EnqueueRaw),
	// "enqueue_many" (EnqueueMany, EnqueueRawMany and EnqueueRawKeyed) or
	// "enqueue_bulk"; or "schedule" for a schedule's tick.
	Operation string
	// Schedule names the schedule whose tick enqueues the jobs; empty for
	// the other operations.
	Schedule string
	// Jobs are the call's jobs, in order.
	Jobs []EnqueueJob
	// Metadata, if the hook sets it, is stored with every job of the call.
	Metadata map[string]string
}

// EnqueueJob is one job of an EnqueueCall.
type EnqueueJob struct {
	Kind, Queue string
	// Metadata is what the job's own options set (see TraceContext).
	Metadata map[string]string
}

// EnqueueResult is the result of an enqueue call, for Hooks.Enqueue.
type EnqueueResult struct {
	// Enqueued is what Enqueue, EnqueueRaw or EnqueueMany returns; nil
	// for EnqueueBulk and EnqueueRawKeyed.
	Enqueued []Enqueued
	// Created counts the jobs created: those enqueued, less duplicates.
	Created int64
	// Err is the call's error; nothing was stored when it is set.
	Err error
}

// ChunkInfo describes a chunk of a chunked job, for Hooks.Chunk.
type ChunkInfo struct {
	JobID int64
	// Seq counts chunks from 1; Offset is the number of records before
	// the chunk, and Records the number in it.
	Seq         int
	Offset      int64
	Records     int
	Duration    time.Duration
	Err         error
	Processed   int64 // records processed by the attempt so far, this chunk's included if it succeeded
	Total       int64 // the job's records, as Chunked.Records said
	Kind, Queue string
}

// Operations of EnqueueCall.
const (
	opEnqueue     = "enqueue"
	opEnqueueMany = "enqueue_many"
	opEnqueueBulk = "enqueue_bulk"
	opSchedule    = "schedule"
)

// hooked runs an enqueue call through the client's Enqueue hooks. enqueue
// inserts rows with the context the hooks returned.
func (c *ops) hooked(ctx context.Context, op string, rows []newJob, enqueue func(context.Context) EnqueueResult) EnqueueResult {
	ctx, done := enqueueHooks(ctx, c.cfg.hooks, &EnqueueCall{Operation: op}, rows)
	res := enqueue(ctx)
	done(res)
	return res
}

// enqueueHooks runs the Enqueue hooks of hooks for call, an enqueue of
// rows, and gives rows the metadata they set. It returns the context to
// insert with, and the function to report the result with, once.
func enqueueHooks(ctx context.Context, hooks []Hooks, call *EnqueueCall, rows []newJob) (context.Context, func(EnqueueResult)) {
	call.Jobs = make([]EnqueueJob, len(rows))
	for i, r := range rows {
		call.Jobs[i] = EnqueueJob{Kind: r.Kind, Queue: r.Queue}
		if r.Metadata != nil {
			call.Jobs[i].Metadata, _ = store.DecodeMetadata(r.Metadata) // encoded by this process
		}
	}
	return enqueue.Hooked(ctx, hooks, func(h Hooks) func(context.Context) (context.Context, func(EnqueueResult)) {
		if h.Enqueue == nil {
			return nil
		}
		return func(ctx context.Context) (context.Context, func(EnqueueResult)) { return h.Enqueue(ctx, call) }
	}, rows, func(i int) map[string]string { return call.Jobs[i].Metadata }, func() map[string]string { return call.Metadata })
}

// attemptHooks runs the Attempt hooks of hooks for ex (see
// runner.Config.Attempt), and returns the handler's context and the
// function that tells them the attempt ended.
func attemptHooks(ctx context.Context, hooks []Hooks, ex *runner.Execution) (context.Context, func(runner.Event)) {
	rec := recordOf(ex.Row())
	ctx, done := hook.Chain(ctx, hooks, func(h Hooks) func(context.Context) (context.Context, func(Event)) {
		if h.Attempt == nil {
			return nil
		}
		return func(ctx context.Context) (context.Context, func(Event)) { return h.Attempt(ctx, &rec) }
	})
	if done == nil {
		return ctx, nil
	}
	return ctx, func(e runner.Event) { done(eventOf(e)) }
}
