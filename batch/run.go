package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/accumulator"
	"github.com/sheaf-dev/sheaf/cleanup"
	"github.com/sheaf-dev/sheaf/worker"
)

// run is the state of one batch between its first task and its outcome. Its
// tasks run on the pool one at a time (they share the batch ID as key), so it
// needs no lock; the pool's mutex orders each task after the previous one.
//
// User code runs under worker.Try, and whatever must follow its failure goes
// in Try's failed function: a call to runtime.Goexit there ends the task's
// goroutine, so code after the call would never run, and the batch would be
// left half done. For the same reason the engine logs after it acts, never
// before: the log handler is user code too.
type run[T any] struct {
	id    string
	gen   uint64
	begun bool // the before hook has run (or there is none): output may exist
	done  bool // the outcome has been reported
	start time.Time
	subs  int
	items int64
	// inHand counts the items of the sub-batch being processed, for fail to
	// count as discarded: after a Goexit, process never gets to.
	inHand int
	// abandoned is set, under the accumulator's lock, when shutdown lets the
	// batch go without its end; its queued sub-batches are then skipped.
	abandoned atomic.Bool
}

// begin runs the before hook the first time a batch does any work. It
// reports false if the hook failed; the batch has then been failed.
func (c *Coordinator[T]) begin(ctx context.Context, r *run[T]) bool {
	if r.begun {
		return true
	}
	r.begun, r.start = true, time.Now()
	return c.before == nil || c.step(ctx, r, "before", 0, func() error { return c.before.BeforeBatch(ctx, r.id) })
}

// step runs fn, user code, as step op of batch r, and fails the batch if fn
// returns an error, panics or calls runtime.Goexit. seq is the sub-batch for
// op "process" and 0 for the others, whose failures, like panics, are
// cleaned up with cleanup.SeqUnknown.
func (c *Coordinator[T]) step(ctx context.Context, r *run[T], op string, seq int, fn func() error) bool {
	return c.observedStep(ctx, r, op, seq, fn, nil)
}

// observedStep is step, calling observe, if not nil, with fn's error and
// with the function that fails the batch, which observe must call.
func (c *Coordinator[T]) observedStep(ctx context.Context, r *run[T], op string, seq int, fn func() error, observe func(error, func())) bool {
	return worker.Try(fn, func(err error) {
		if observe != nil {
			observe(err, func() { c.failStep(ctx, r, op, seq, err) })
			return
		}
		c.failStep(ctx, r, op, seq, err)
	})
}

// failStep fails batch r after step op failed with err.
func (c *Coordinator[T]) failStep(ctx context.Context, r *run[T], op string, seq int, err error) {
	cseq := seq
	if _, ok := err.(*PanicError); ok || seq == 0 {
		cseq = cleanup.SeqUnknown // an unexpected error: no sub-batch to blame
	}
	c.fail(ctx, r, cseq, &ProcessError{BatchID: r.id, Op: op, Seq: seq, Err: err})
}

func (c *Coordinator[T]) process(ctx context.Context, r *run[T], sb accumulator.SubBatch[T]) {
	if c.o.reuse {
		defer c.acc.Recycle(sb.Items)
	}
	n := len(sb.Items)
	if r.done || r.abandoned.Load() {
		c.stats.discarded.Add(int64(n))
		return
	}
	r.inHand = n
	if ctx.Err() != nil {
		c.fail(ctx, r, cleanup.SeqIncomplete, stopped(ctx))
		return
	}
	b := Batch[T]{ID: sb.BatchID, Seq: sb.Seq, Offset: sb.Offset, Items: sb.Items}
	if !c.begin(ctx, r) {
		return
	}
	var observe func(error, func())
	if len(c.o.subObservers) > 0 {
		t0 := time.Now()
		observe = func(err error, then func()) {
			c.observeSubBatch(SubBatchResult{BatchID: b.ID, Seq: b.Seq, Items: n, Duration: time.Since(t0), Err: err}, 0, then)
		}
	}
	if !c.observedStep(ctx, r, "process", sb.Seq, func() error { return c.proc.Process(ctx, b) }, observe) {
		return
	}
	r.inHand = 0
	r.subs++
	r.items += int64(n)
	c.stats.subBatches.Add(1)
	c.stats.processed.Add(int64(n))
	// After the batch's state is up to date: a Goexit in an observer then
	// costs only the log line.
	done := func() {
		c.logSafely(slog.LevelDebug, "batch: sub-batch processed", "batch_id", r.id, "seq", sb.Seq, "items", n)
	}
	if observe != nil {
		observe(nil, done)
		return
	}
	done()
}

// finish runs after the last sub-batch of a batch whose end-of-batch arrived.
func (c *Coordinator[T]) finish(ctx context.Context, r *run[T]) {
	if r.done {
		return
	}
	if ctx.Err() != nil {
		c.fail(ctx, r, cleanup.SeqIncomplete, stopped(ctx))
		return
	}
	if !c.begin(ctx, r) {
		return
	}
	if c.after != nil && !c.step(ctx, r, "after", 0, func() error { return c.after.AfterBatch(ctx, r.id) }) {
		return
	}
	mctx, cancel := c.strategyContext(ctx)
	if !c.step(ctx, r, "complete", 0, func() error { defer cancel(); return c.o.cleanup.MarkComplete(mctx, r.id) }) {
		return
	}
	r.done = true
	c.report(r, Outcome{Status: Completed})
}

// abandon ends a batch whose end-of-batch never arrived. After a hard stop
// its error wraps ErrStopped too, as every batch's that the stop ended.
func (c *Coordinator[T]) abandon(ctx context.Context, r *run[T]) {
	if r.done {
		return
	}
	r.done = true
	err := ErrIncomplete
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrIncomplete, stopped(ctx))
	}
	c.cleanUpAndReport(ctx, r, Outcome{Status: Incomplete, Seq: cleanup.SeqIncomplete, Err: err})
}

// fail ends a batch that cannot complete: later items and sub-batches are
// discarded, the cleanup strategy removes what was written, and the outcome
// is reported. A failure caused by a hard stop (a context error while work is
// cancelled) is not a fault of the batch, so it is reported Incomplete, its
// error wrapping ErrStopped like that of a batch the stop kept from starting;
// any other error is a failure, even one that arrives during a stop.
func (c *Coordinator[T]) fail(ctx context.Context, r *run[T], seq int, err error) {
	r.done = true
	c.stats.discarded.Add(int64(r.inHand))
	r.inHand = 0
	c.acc.Fail(r.id, r.gen) // the accumulator counts what it drops, see queueEnd
	status := Failed
	if ctx.Err() != nil && (errors.Is(err, ErrStopped) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		status, seq = Incomplete, cleanup.SeqIncomplete
		if !errors.Is(err, ErrStopped) {
			err = fmt.Errorf("%w: %w", ErrStopped, err)
		}
	}
	c.cleanUpAndReport(ctx, r, Outcome{Status: status, Seq: seq, Err: err})
}

// cleanUpAndReport has the cleanup strategy remove what a batch that will not
// complete wrote, with o.Seq, and then reports o with the cleanup's error.
func (c *Coordinator[T]) cleanUpAndReport(ctx context.Context, r *run[T], o Outcome) {
	if !r.begun { // no step ran, so nothing was written
		c.report(r, o)
		return
	}
	c.stats.cleanups.Add(1)
	o.CleanedUp = true
	cctx, cancel := c.strategyContext(ctx)
	if !worker.Try(func() error { defer cancel(); return c.o.cleanup.Cleanup(cctx, r.id, o.Seq) }, func(err error) {
		c.stats.cleanupFailures.Add(1)
		o.CleanupErr = err
		c.report(r, o)
	}) {
		return
	}
	c.report(r, o)
}

// strategyContext is the context for the cleanup strategy: a hard stop does
// not cancel it, because cleanup is what keeps a stopped batch
// all-or-nothing, but it is bounded.
func (c *Coordinator[T]) strategyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.o.cleanupTimeout)
}

// report counts the outcome and hands it to the observer before logging it,
// so that a logger that fails cannot lose an outcome.
func (c *Coordinator[T]) report(r *run[T], o Outcome) {
	o.BatchID, o.SubBatches, o.Items = r.id, r.subs, r.items
	if r.begun {
		o.Duration = time.Since(r.start)
	}
	switch o.Status {
	case Completed:
		c.stats.completed.Add(1)
	case Failed:
		c.stats.failed.Add(1)
	case Incomplete:
		c.stats.incomplete.Add(1)
	}
	c.observe(r, o, 0)
}

// observe hands o to the observers from the i-th on, and then logs it. Each
// observer runs under worker.Try, and what follows it runs in Try's failed
// function too, so that a Goexit in one observer loses neither the others
// nor the log.
func (c *Coordinator[T]) observe(r *run[T], o Outcome, i int) {
	for ; i < len(c.o.observers); i++ {
		f, next := c.o.observers[i], i+1
		if !worker.Try(func() error { f(o); return nil }, func(err error) {
			c.logSafely(slog.LevelError, "batch: observer panicked", "batch_id", r.id, "err", err)
			c.observe(r, o, next)
		}) {
			return
		}
	}
	c.logOutcome(r, o)
}

// observeSubBatch hands res to the sub-batch observers from the i-th on,
// recovering and logging their panics, and then calls then. As in observe,
// what follows an observer runs in Try's failed function too, so a Goexit in
// one loses neither the others nor then.
func (c *Coordinator[T]) observeSubBatch(res SubBatchResult, i int, then func()) {
	for ; i < len(c.o.subObservers); i++ {
		f, next := c.o.subObservers[i], i+1
		if !worker.Try(func() error { f(res); return nil }, func(err error) {
			c.logSafely(slog.LevelError, "batch: sub-batch observer panicked", "batch_id", res.BatchID, "seq", res.Seq, "err", err)
			c.observeSubBatch(res, next, then)
		}) {
			return
		}
	}
	then()
}

func (c *Coordinator[T]) logOutcome(r *run[T], o Outcome) {
	switch o.Status {
	case Completed:
		c.logSafely(slog.LevelDebug, "batch: completed", "batch_id", r.id, "sub_batches", r.subs, "items", r.items, "duration", o.Duration)
		return
	case Failed:
		c.logSafely(slog.LevelError, "batch: failed", "batch_id", r.id, "seq", o.Seq, "err", o.Err, "cleanup_err", o.CleanupErr)
	case Incomplete:
		c.logSafely(slog.LevelWarn, "batch: incomplete", "batch_id", r.id, "sub_batches", r.subs, "err", o.Err, "cleanup_err", o.CleanupErr)
	}
	switch {
	case !r.begun: // nothing to clean up
	case o.CleanupErr != nil:
		c.logSafely(slog.LevelError, "batch: cleanup failed; partial output may remain", "batch_id", r.id, "seq", o.Seq, "err", o.CleanupErr)
	default:
		c.logSafely(slog.LevelInfo, "batch: cleaned up", "batch_id", r.id, "seq", o.Seq)
	}
}

// logSafely logs, recovering a panic in the handler.
func (c *Coordinator[T]) logSafely(level slog.Level, msg string, args ...any) {
	if !c.log.Enabled(context.Background(), level) {
		return
	}
	_ = worker.Safely(func() error {
		c.log.Log(context.Background(), level, msg, args...)
		return nil
	})
}

func stopped(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))
}
