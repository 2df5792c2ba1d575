package queue

// Executing: one attempt of one job, from claim to result.

import (
	"context"
	"database/sql"
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
	// counted is set once the attempt counts towards MaxAttempts: at the
	// claim, or, for a suspect, when it starts (see JobRecord.Rescues).
	// Guarded by r.mu once the attempt may have started, as are the row's
	// Attempts and StartedAt: a stop out of time reads them while it runs.
	counted bool
	// Guarded by r.mu: released means the job is being put back in the
	// queue (by a stop out of time, because it waited too long for a
	// worker, or because its start as a suspect could not be recorded), so
	// its result must be dropped; cut means a stop out of time put it back
	// (or tried to) while its handler ran, so nothing more is written for
	// it; finished means its handler returned (or it never ran) and its
	// result is written or on its way.
	released, cut, finished bool
	// ends are the functions the Attempt hooks returned, and hooked the
	// context they made, for the Release hooks (see Hooks).
	ends   []func(Event)
	hooked context.Context
}

func (ex *execution) suspect() bool { return ex.row.Rescues > 0 }

// launch hands claimed jobs to the workers: a suspect first, ahead of any
// job claimed ahead, since it is claimed only when a worker is free.
func (r *Runner) launch(jobsCtx context.Context, rows []JobRecord) {
	now := time.Now()
	exs := make([]*execution, 0, len(rows))
	var suspect *execution
	r.mu.Lock()
	for i := range rows {
		ctx, cancel := context.WithCancelCause(jobsCtx)
		ex := &execution{r: r, row: rows[i], ctx: ctx, cancel: cancel, claimed: now}
		ex.counted = !ex.suspect()
		r.running[ex] = struct{}{}
		r.held[keyOf(ex)] = ex
		if ex.suspect() {
			r.suspect, suspect = ex, ex
		} else {
			exs = append(exs, ex)
		}
	}
	r.mu.Unlock()
	if suspect != nil {
		r.pool.Push(true, suspect)
	}
	r.pool.Push(false, exs...)
}

// unhold forgets claims whose results or requeues are written (or given up
// on): the lease keeper stops renewing them.
func (r *Runner) unhold(exs ...*execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ex := range exs {
		if r.held[keyOf(ex)] == ex {
			delete(r.held, keyOf(ex))
		}
	}
}

// unwait takes the jobs that release selects out of the workers' reach
// (those still waiting for one) and out of running, marks them released,
// and returns them, for the caller to put back in the database's queue.
func (r *Runner) unwait(release func(*execution) bool) []*execution {
	out := r.pool.Take(release)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ex := range out {
		ex.released = true
		delete(r.running, ex)
		if r.suspect == ex {
			r.suspect = nil
		}
	}
	return out
}

// errGoexit is the error of an attempt whose handler called runtime.Goexit.
var errGoexit = errors.New("queue: handler called runtime.Goexit")

// execute runs one attempt on a worker's goroutine.
func (r *Runner) execute(ex *execution) {
	ctx := ex.ctx
	defer ex.cancel(nil)
	ex.start = time.Now()
	var err error
	e, lookupErr := r.c.reg.lookup(ex.row.Kind)
	if ctx.Err() == nil && ex.suspect() {
		if err := r.startSuspect(ex); err != nil {
			ex.cancel(err)
		}
	}
	if ctx.Err() != nil {
		// Cancelled or lost while it waited for a worker (see capacity):
		// it never starts, and finish says why.
		r.finish(ctx, ex, e, context.Cause(ctx), 0)
		return
	}
	r.observe(ex.event(EventStarted))
	r.debug(ex, "queue: job started")
	if len(r.cfg.hooks) > 0 {
		ctx = r.attemptHooks(ctx, ex)
	}
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
			r.pool.Replace()
		}
	}()
	err := worker.Safely(func() error { return e.work(ctx, ex, e) })
	normal = true
	return err
}

// startSuspect counts the attempt of a suspect that is about to start. It
// returns the cause to cancel the attempt with when it must not start.
func (r *Runner) startSuspect(ex *execution) error {
	// A suspect may kill the process as it starts: the jobs this runner
	// finished before it must not die with it, unwritten, and run again.
	r.completer.WaitFlushed(r.timeouts.statement)
	var attempts int
	var started time.Time
	err := r.retry(func(ctx context.Context, _ int) (err error) {
		attempts, started, err = r.c.st.StartSuspect(ctx, ex.row.ID, ex.row.Claims)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: job %d", ErrLeaseLost, ex.row.ID)
	case err != nil:
		// It never starts; it goes back to the queue, or, if that fails
		// too, is rescued, its attempt uncounted either way.
		r.jobLogger(&ex.row).Error("queue: could not record the start of a rescued job; putting it back", "err", err)
		r.mu.Lock()
		ex.released = true
		r.mu.Unlock()
		return ErrStopping
	}
	r.mu.Lock()
	ex.row.Attempts, ex.row.StartedAt, ex.counted = attempts, &started, true
	r.mu.Unlock()
	return nil
}

// finish hands the attempt's result to the completer, unless the job is no
// longer this runner's to finish.
func (r *Runner) finish(ctx context.Context, ex *execution, e *kindEntry, err error, took time.Duration) {
	cause := context.Cause(ctx)
	dropped := errors.Is(cause, ErrCancelled) || errors.Is(cause, ErrLeaseLost)
	r.mu.Lock()
	released, cut := ex.released, ex.cut
	ex.finished = true
	if !released && !dropped {
		// Counted as on its way to the completer from now: a stop out of
		// time, which cuts short only attempts not finished, waits for it
		// to be written (see cutShort).
		r.completer.Reserve()
	}
	r.mu.Unlock()
	switch {
	case cut: // put back by a stop out of time while its handler ran: whatever it returned is dropped
		ex.endedAs(EventRequeued, err, took)
	case released: // its start as a suspect could not be recorded: back to the queue
		ex.endedAs(EventRequeued, err, took)
		_ = r.requeue([]*execution{ex}, time.Time{}, "could not record the start of a rescued job") // logged
	case errors.Is(cause, ErrCancelled):
		r.unhold(ex)
		r.stats.cancelled.Add(1)
		ev := ex.event(EventCancelled)
		ev.Duration = took
		ex.endedAs(EventCancelled, err, took)
		r.observe(ev)
		r.jobLogger(&ex.row).Info("queue: job cancelled while running", "duration", took)
	case errors.Is(cause, ErrLeaseLost):
		r.unhold(ex)
		r.stats.rejected.Add(1)
		ex.endedAs(EventRejected, err, took)
		r.observe(ex.event(EventRejected))
		r.jobLogger(&ex.row).Warn("queue: job lost its lease while running; its result is dropped")
	default:
		res := r.resultOf(ex, e, err, took)
		if len(ex.ends) > 0 {
			ex.ended(res.event())
		}
		r.completer.SendReserved(res)
	}
	r.mu.Lock()
	delete(r.running, ex)
	wasSuspect := r.suspect == ex
	if wasSuspect {
		r.suspect = nil
	}
	r.mu.Unlock()
	if wasSuspect {
		r.suspects.Store(true) // the next may be waiting
		r.wakeFetch()
	} else if r.more.Load() {
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
		res.delay = r.delay(ex, e)
	}
	return res
}

// delay is how long the job waits before its next attempt, by its own
// backoff if it has one, else its kind's. A Backoff of the user's that
// panics gets the default's delay, rather than taking the runner down.
func (r *Runner) delay(ex *execution, e *kindEntry) time.Duration {
	b := DefaultBackoff
	if e != nil {
		b = e.defaults.backoff
	}
	if len(ex.row.backoffJSON) > 0 {
		own, err := decodeBackoff(ex.row.backoffJSON)
		if err != nil {
			r.jobLogger(&ex.row).Warn("queue: job's stored backoff does not decode; using its kind's", "err", err)
		} else {
			b = own
		}
	}
	var d time.Duration
	if err := worker.Safely(func() error { d = b.Delay(ex.row.Attempts); return nil }); err != nil {
		r.jobLogger(&ex.row).Error("queue: the job's backoff panicked; using the default's delay", "err", err)
		d = DefaultBackoff.Delay(ex.row.Attempts)
	}
	return max(d, 0)
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
	return ex.write(ctx, func(ctx context.Context) (bool, error) {
		return ex.r.c.st.SetProgress(ctx, ex.row.ID, ex.row.Claims, processed, total)
	})
}

// write runs one of the attempt's own writes (see store.SetProgress), bounded
// like a bookkeeping statement; a write that changed nothing found the job
// no longer this attempt's.
func (ex *execution) write(ctx context.Context, w func(context.Context) (bool, error)) error {
	if ex == nil {
		return nil // a Job built by hand, as in a handler's unit test
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ex.r.timeouts.statement)
	defer cancel()
	changed, err := w(ctx)
	if err != nil {
		return fmt.Errorf("queue: update job %d: %w", ex.row.ID, err)
	}
	if !changed {
		return fmt.Errorf("%w: job %d", ErrLeaseLost, ex.row.ID)
	}
	return nil
}

// mayHaveOutput reports whether an earlier claim of the job may have left
// output behind. A chunked attempt saves the job's total before it writes
// its first chunk, so one that wrote anything left the total set.
func (ex *execution) mayHaveOutput() bool {
	return ex != nil && (ex.row.Claims > 1 || ex.row.Total != nil)
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
	st, claims, err := ex.now(ctx)
	if err != nil {
		return false
	}
	return st == StatusQueued || st == StatusCompleted || (st == StatusProcessing && claims != ex.row.Claims)
}

// now reads the job's status and claim number as the database has them.
func (ex *execution) now(ctx context.Context) (Status, int, error) {
	st, claims, err := ex.r.c.st.State(ctx, ex.row.ID)
	return Status(st), claims, err
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
