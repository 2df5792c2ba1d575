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
type run[T any] struct {
	id    string
	gen   uint64
	begun bool // the before hook has run (or there is none): output may exist
	done  bool // the outcome has been reported
	start time.Time
	subs  int
	items int64
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
	if c.before == nil {
		return true
	}
	if err := worker.Safely(func() error { return c.before.BeforeBatch(ctx, r.id) }); err != nil {
		c.fail(ctx, r, cleanup.SeqUnknown, &ProcessError{BatchID: r.id, Op: "before", Err: err})
		return false
	}
	return true
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
	if ctx.Err() != nil {
		c.stats.discarded.Add(int64(n))
		c.fail(ctx, r, cleanup.SeqIncomplete, stopped(ctx))
		return
	}
	if !c.begin(ctx, r) {
		c.stats.discarded.Add(int64(n))
		return
	}
	b := Batch[T]{ID: sb.BatchID, Seq: sb.Seq, Offset: sb.Offset, Items: sb.Items}
	err := worker.Safely(func() error { return c.proc.Process(ctx, b) })
	if err != nil {
		c.stats.discarded.Add(int64(n))
		seq := sb.Seq
		if _, ok := err.(*PanicError); ok {
			seq = cleanup.SeqUnknown // as the specification asks for unexpected errors
		}
		c.fail(ctx, r, seq, &ProcessError{BatchID: r.id, Op: "process", Seq: sb.Seq, Err: err})
		return
	}
	r.subs++
	r.items += int64(n)
	c.stats.subBatches.Add(1)
	c.stats.processed.Add(int64(n))
	c.logSafely(slog.LevelDebug, "batch: sub-batch processed", "batch_id", r.id, "seq", sb.Seq, "items", n)
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
	if c.after != nil {
		if err := worker.Safely(func() error { return c.after.AfterBatch(ctx, r.id) }); err != nil {
			c.fail(ctx, r, cleanup.SeqUnknown, &ProcessError{BatchID: r.id, Op: "after", Err: err})
			return
		}
	}
	mctx, cancel := c.strategyContext(ctx)
	err := worker.Safely(func() error { return c.o.cleanup.MarkComplete(mctx, r.id) })
	cancel()
	if err != nil {
		c.fail(ctx, r, cleanup.SeqUnknown, &ProcessError{BatchID: r.id, Op: "complete", Err: err})
		return
	}
	r.done = true
	c.report(r, Outcome{Status: Completed})
}

// abandon ends a batch whose end-of-batch never arrived.
func (c *Coordinator[T]) abandon(ctx context.Context, r *run[T]) {
	if r.done {
		return
	}
	r.done = true
	c.report(r, Outcome{
		Status:     Incomplete,
		Seq:        cleanup.SeqIncomplete,
		Err:        ErrIncomplete,
		CleanupErr: c.cleanup(ctx, r, cleanup.SeqIncomplete),
	})
}

// fail ends a batch that cannot complete: later items and sub-batches are
// discarded, the cleanup strategy removes what was written, and the outcome
// is reported. A failure caused by a hard stop (a context error while work is
// cancelled) is not a fault of the batch, so it is reported Incomplete, its
// error wrapping ErrStopped like that of a batch the stop kept from starting;
// any other error is a failure, even one that arrives during a stop.
func (c *Coordinator[T]) fail(ctx context.Context, r *run[T], seq int, err error) {
	r.done = true
	c.acc.Fail(r.id, r.gen) // the accumulator counts what it drops, see queueEnd
	status := Failed
	if ctx.Err() != nil && (errors.Is(err, ErrStopped) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		status, seq = Incomplete, cleanup.SeqIncomplete
		if !errors.Is(err, ErrStopped) {
			err = fmt.Errorf("%w: %w", ErrStopped, err)
		}
	}
	c.report(r, Outcome{Status: status, Seq: seq, Err: err, CleanupErr: c.cleanup(ctx, r, seq)})
}

func (c *Coordinator[T]) cleanup(ctx context.Context, r *run[T], seq int) error {
	if !r.begun {
		return nil // no step ran, so nothing was written
	}
	c.stats.cleanups.Add(1)
	cctx, cancel := c.strategyContext(ctx)
	defer cancel()
	err := worker.Safely(func() error { return c.o.cleanup.Cleanup(cctx, r.id, seq) })
	if err != nil {
		c.stats.cleanupFailures.Add(1)
		c.logSafely(slog.LevelError, "batch: cleanup failed; partial output may remain", "batch_id", r.id, "seq", seq, "err", err)
		return err
	}
	c.logSafely(slog.LevelInfo, "batch: cleaned up", "batch_id", r.id, "seq", seq)
	return nil
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
	if c.o.observer != nil {
		if err := worker.Safely(func() error { c.o.observer(o); return nil }); err != nil {
			c.logSafely(slog.LevelError, "batch: observer panicked", "batch_id", r.id, "err", err)
		}
	}
	switch o.Status {
	case Completed:
		c.logSafely(slog.LevelDebug, "batch: completed", "batch_id", r.id, "sub_batches", r.subs, "items", r.items, "duration", o.Duration)
	case Failed:
		c.logSafely(slog.LevelError, "batch: failed", "batch_id", r.id, "seq", o.Seq, "err", o.Err, "cleanup_err", o.CleanupErr)
	case Incomplete:
		c.logSafely(slog.LevelWarn, "batch: incomplete", "batch_id", r.id, "sub_batches", r.subs, "err", o.Err, "cleanup_err", o.CleanupErr)
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
