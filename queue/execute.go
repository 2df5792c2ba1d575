package queue

// Executing: one attempt of one job, from claim to result.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/sheaf-dev/sheaf/worker"
)

// ErrTimeout is the cause of a job context cancelled by the kind's Timeout.
var ErrTimeout = errors.New("queue: job timed out")

// execution is one attempt of one job on this runner.
type execution struct {
	r       *Runner
	row     JobRecord
	ctx     context.Context // cancelled with a cause; handed to the handler
	cancel  context.CancelCauseFunc
	claimed time.Time // when the runner claimed it
	start   time.Time // when a worker took it up
	// Guarded by r.mu: released means the job is being put back in the
	// queue (by Stop, or because it waited too long for a worker), so its
	// result must be dropped; finished means its result is written or on
	// its way.
	released, finished bool
}

// launch hands a claimed job to the workers.
func (r *Runner) launch(jobsCtx context.Context, row *JobRecord) {
	ctx, cancel := context.WithCancelCause(jobsCtx)
	ex := &execution{r: r, row: *row, ctx: ctx, cancel: cancel, claimed: time.Now()}
	r.mu.Lock()
	r.running[ex] = struct{}{}
	r.waiting = append(r.waiting, ex)
	r.workable.Signal()
	r.mu.Unlock()
}

// work runs waiting jobs, oldest first, until the runner drains.
func (r *Runner) work() {
	defer r.jobs.Done()
	for {
		r.mu.Lock()
		for len(r.waiting) == 0 && !r.draining {
			r.workable.Wait()
		}
		if len(r.waiting) == 0 {
			r.mu.Unlock()
			return
		}
		ex := r.waiting[0]
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		r.mu.Unlock()
		r.execute(ex.ctx, ex)
	}
}

// unwait takes the waiting jobs that release selects out of the queue for
// the workers and out of running, marked released, and returns them. The
// caller holds r.mu and puts them back in the database's queue.
func (r *Runner) unwait(release func(*execution) bool) []*execution {
	var out []*execution
	kept := r.waiting[:0]
	for _, ex := range r.waiting {
		if release(ex) {
			ex.released = true
			delete(r.running, ex)
			out = append(out, ex)
			continue
		}
		kept = append(kept, ex)
	}
	clear(r.waiting[len(kept):])
	r.waiting = kept
	return out
}

// errGoexit is the error of an attempt whose handler called runtime.Goexit.
var errGoexit = errors.New("queue: handler called runtime.Goexit")

func (r *Runner) execute(ctx context.Context, ex *execution) {
	defer ex.cancel(nil)
	ex.start = time.Now()
	var err error
	e, lookupErr := r.c.reg.lookup(ex.row.Kind)
	if ctx.Err() != nil {
		// Cancelled or lost while it waited for a worker (see capacity):
		// it never starts, and finish says why.
		r.finish(ctx, ex, e, context.Cause(ctx), 0)
		return
	}
	r.observe(ex.event(EventStarted))
	r.debug(ex, "queue: job started")
	if lookupErr != nil {
		err = fmt.Errorf("runner %s cannot work it: %w", r.cfg.runnerID, lookupErr)
	} else {
		if e.defaults.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, e.defaults.timeout, ErrTimeout)
			defer cancel()
		}
		err = r.runHandler(ctx, ex, e)
		if pe, ok := err.(*worker.PanicError); ok {
			r.jobLogger(&ex.row).Error("queue: job panicked", "panic", pe.Value, "stack", string(pe.Stack))
		}
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.Cause(ctx)) {
		err = fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	took := time.Since(ex.start)
	average(&r.jobNanos, took)
	r.finish(ctx, ex, e, err, took)
}

// runHandler runs the kind's handler, turning a panic into an error. A
// handler that calls runtime.Goexit (as t.FailNow does) ends this worker
// goroutine whatever happens; its attempt is then finished as failed and a
// new worker takes this one's place, so the job is not left PROCESSING.
func (r *Runner) runHandler(ctx context.Context, ex *execution, e *kindEntry) error {
	normal := false
	defer func() {
		if !normal && recover() == nil {
			r.jobLogger(&ex.row).Error("queue: handler called runtime.Goexit", "stack", string(debug.Stack()))
			r.finish(ctx, ex, e, errGoexit, time.Since(ex.start))
			ex.cancel(nil)
			r.jobs.Add(1)
			go r.work()
		}
	}()
	err := worker.Safely(func() error { return e.work(ctx, ex, e) })
	normal = true
	return err
}

// finish hands the attempt's result to the completer, unless the job is no
// longer this runner's to finish.
func (r *Runner) finish(ctx context.Context, ex *execution, e *kindEntry, err error, took time.Duration) {
	r.mu.Lock()
	released := ex.released
	ex.finished = true
	r.mu.Unlock()
	cause := context.Cause(ctx)
	switch {
	case released: // Stop ran out of time: back to the queue, now the handler has returned
		r.requeue([]*execution{ex}, "stop ran out of time")
	case errors.Is(cause, ErrCancelled):
		r.stats.cancelled.Add(1)
		ev := ex.event(EventCancelled)
		ev.Duration = took
		r.observe(ev)
		r.jobLogger(&ex.row).Info("queue: job cancelled while running", "duration", took)
	case errors.Is(cause, ErrLeaseLost):
		r.stats.rejected.Add(1)
		r.observe(ex.event(EventRejected))
		r.jobLogger(&ex.row).Warn("queue: job lost its lease while running; its result is dropped")
	default:
		r.results <- r.resultOf(ex, e, err, took)
	}
	r.mu.Lock()
	delete(r.running, ex)
	r.mu.Unlock()
	if r.more.Load() {
		r.wakeFetch()
	}
}

func (r *Runner) resultOf(ex *execution, e *kindEntry, err error, took time.Duration) result {
	res := result{ex: ex, err: err, took: took}
	switch {
	case err == nil:
		res.status = StatusCompleted
	case IsPermanent(err) || ex.row.Attempts >= ex.row.MaxAttempts:
		res.status = StatusFailed
	default:
		res.status = StatusQueued
		res.delay = r.backoff(ex, e).Delay(ex.row.Attempts)
	}
	return res
}

// backoff is the job's own policy if it has one, else its kind's.
func (r *Runner) backoff(ex *execution, e *kindEntry) Backoff {
	if len(ex.row.backoffJSON) > 0 {
		b, err := decodeBackoff(ex.row.backoffJSON)
		if err == nil {
			return b
		}
		r.jobLogger(&ex.row).Warn("queue: job's stored backoff does not decode; using its kind's", "err", err)
	}
	if e != nil {
		return e.defaults.backoff
	}
	return DefaultBackoff
}

func (ex *execution) event(t EventType) Event {
	e := Event{Type: t, JobID: ex.row.ID, Kind: ex.row.Kind, Queue: ex.row.Queue, Priority: ex.row.Priority,
		Attempt: ex.row.Attempts, MaxAttempts: ex.row.MaxAttempts}
	if ex.row.CorrelationID != nil {
		e.CorrelationID = *ex.row.CorrelationID
	}
	if ex.row.RunID != nil {
		e.RunID = *ex.row.RunID
	}
	return e
}

func (ex *execution) setProgress(ctx context.Context, processed, total int64) error {
	return ex.update(ctx, "processed = $1, total = $2", processed, total)
}

// update sets columns of the running job, guarded like a result: only while
// the job is this attempt's. set uses $1, $2, ... for args.
func (ex *execution) update(ctx context.Context, set string, args ...any) error {
	if ex == nil {
		return nil // a Job built by hand, as in a handler's unit test
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	n := len(args)
	query := fmt.Sprintf("UPDATE sheaf_jobs SET %s WHERE id = $%d AND status = 'PROCESSING' AND attempts = $%d", set, n+1, n+2)
	res, err := ex.r.sqlDB.ExecContext(ctx, query, append(args, ex.row.ID, ex.row.Attempts)...)
	if err != nil {
		return fmt.Errorf("queue: update job %d: %w", ex.row.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: job %d", ErrLeaseLost, ex.row.ID)
	}
	return nil
}

// mayHaveOutput reports whether an earlier attempt of the job may have left
// output behind: it was counted, or it got as far as saving its progress (an
// attempt that Stop put back is not counted).
func (ex *execution) mayHaveOutput() bool {
	return ex != nil && (ex.row.Attempts > 1 || ex.row.Total != nil)
}

// movedOn reports whether the job has passed from this attempt to another:
// rescued, and queued again or claimed by a later attempt, or completed by
// one. Such an attempt must not clean up its output, which would remove the
// later attempt's; the later attempt cleans up before it starts. A FAILED or
// CANCELLED job has no later attempt to do that, so it has not moved on; nor
// has a job whose row cannot be read.
func (ex *execution) movedOn(ctx context.Context) bool {
	if ex == nil {
		return false
	}
	st, attempts, err := ex.now(ctx)
	if err != nil {
		return false
	}
	return st == StatusQueued || st == StatusCompleted || (st == StatusProcessing && attempts != ex.row.Attempts)
}

// now reads the job's status and attempt count as the database has them.
func (ex *execution) now(ctx context.Context) (Status, int, error) {
	var st Status
	var attempts int
	err := ex.r.sqlDB.QueryRowContext(ctx, "SELECT status, attempts FROM sheaf_jobs WHERE id = $1", ex.row.ID).Scan(&st, &attempts)
	return st, attempts, err
}

// cancelRunning cancels the context of every running attempt of a job.
func (r *Runner) cancelRunning(id int64, cause error) {
	r.mu.Lock()
	var exs []*execution
	for ex := range r.running {
		if ex.row.ID == id {
			exs = append(exs, ex)
		}
	}
	r.mu.Unlock()
	for _, ex := range exs {
		ex.cancel(cause)
	}
}
