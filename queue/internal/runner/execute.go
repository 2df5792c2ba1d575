package runner

// Executing: one attempt of one job, from claim to result.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/worker"
)

// Execution is one attempt of one job on this runner.
type Execution struct {
	r       *Runner
	row     Row
	ctx     context.Context // cancelled with a cause; handed to the handler
	cancel  context.CancelCauseFunc
	claimed time.Time // when the runner claimed it
	start   time.Time // when a worker took it up
	// counted is set once the attempt counts towards MaxAttempts: at the
	// claim, or, for a suspect, when it starts (see queue.JobRecord.Rescues).
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
	// end is the function the Attempt hook returned, and hooked the
	// context it made, for the Release hooks (see queue.Hooks).
	end    func(Event)
	hooked context.Context
	// kind is the job's kind, looked up as the attempt begins (nil if
	// unknown), before its handler runs.
	kind *Kind
	// inTx is the completion the handler wrote in its own transaction
	// (Job.CompleteTx), if it did; txs are the transactions it called
	// CompleteTx in, for a stop out of time to roll back (see cutRunning).
	// Guarded by r.mu.
	inTx *txCompletion
	txs  []gorm.TxCommitter
}

func (ex *Execution) suspect() bool { return ex.row.Rescues > 0 }

// launch hands claimed jobs to the workers: a suspect first, ahead of any
// job claimed ahead, since it is claimed only when a worker is free.
func (r *Runner) launch(jobsCtx context.Context, rows []Row) {
	now := time.Now()
	exs := make([]*Execution, 0, len(rows))
	var suspect *Execution
	r.mu.Lock()
	for i := range rows {
		ctx, cancel := context.WithCancelCause(jobsCtx)
		ex := &Execution{r: r, row: rows[i], ctx: ctx, cancel: cancel, claimed: now}
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
func (r *Runner) unhold(exs ...*Execution) {
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
func (r *Runner) unwait(release func(*Execution) bool) []*Execution {
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
func (r *Runner) execute(ex *Execution) {
	ctx := ex.ctx
	defer ex.cancel(nil)
	ex.start = time.Now()
	var err error
	e, lookupErr := r.kind(ex.row.Kind)
	ex.kind = e
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
	if r.cfg.Attempt != nil {
		ctx = r.attemptHooks(ctx, ex)
	}
	if lookupErr != nil {
		err = fmt.Errorf("runner %s cannot work it: %w", r.cfg.ID, lookupErr)
	} else {
		if e.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, e.Timeout, r.cfg.Errors.Timeout)
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
func (r *Runner) runHandler(ctx context.Context, ex *Execution, e *Kind) error {
	normal := false
	defer func() {
		if !normal && recover() == nil {
			r.jobLogger(&ex.row).Error("queue: handler called runtime.Goexit", "stack", string(debug.Stack()))
			r.finish(ctx, ex, e, errGoexit, time.Since(ex.start))
			ex.cancel(nil)
			r.pool.Replace()
		}
	}()
	err := worker.Safely(func() error { return e.Work(ctx, ex) })
	normal = true
	return err
}

// startSuspect counts the attempt of a suspect that is about to start. It
// returns the cause to cancel the attempt with when it must not start.
func (r *Runner) startSuspect(ex *Execution) error {
	// A suspect may kill the process as it starts: the jobs this runner
	// finished before it must not die with it, unwritten, and run again.
	r.completer.WaitFlushed(r.timeouts.statement)
	var attempts int
	var started time.Time
	err := r.retry(func(ctx context.Context, _ int) (err error) {
		attempts, started, err = r.st.StartSuspect(ctx, ex.row.ID, ex.row.Claims)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: job %d", ex.r.cfg.Errors.LeaseLost, ex.row.ID)
	case err != nil:
		// It never starts; it goes back to the queue, or, if that fails
		// too, is rescued, its attempt uncounted either way.
		r.jobLogger(&ex.row).Error("queue: could not record the start of a rescued job; putting it back", "err", err)
		r.mu.Lock()
		ex.released = true
		r.mu.Unlock()
		return r.cfg.Errors.Stopping
	}
	r.mu.Lock()
	ex.row.Attempts, ex.row.StartedAt, ex.counted = attempts, &started, true
	r.mu.Unlock()
	return nil
}

// finish hands the attempt's result to the completer, unless the job is no
// longer this runner's to finish.
func (r *Runner) finish(ctx context.Context, ex *Execution, e *Kind, err error, took time.Duration) {
	r.mu.Lock()
	inTx := ex.inTx
	r.mu.Unlock()
	committed := false
	if inTx != nil {
		// Whether the handler's transaction committed decides, before
		// anything the runner would do with the job: a committed
		// completion is final, even if a stop out of time cut the
		// attempt short meanwhile (its put-back found the job COMPLETED
		// and changed nothing).
		committed, err = r.settleTx(ex, inTx, err)
	}
	cause := context.Cause(ctx)
	dropped := errors.Is(cause, r.cfg.Errors.Cancelled) || errors.Is(cause, r.cfg.Errors.LeaseLost)
	r.mu.Lock()
	released, cut := ex.released, ex.cut
	ex.finished = true
	if !committed && !released && !dropped {
		// Counted as on its way to the completer from now: a stop out of
		// time, which cuts short only attempts not finished, waits for it
		// to be written (see cutShort).
		r.completer.Reserve()
	}
	r.mu.Unlock()
	switch {
	case committed:
		r.completedInTx(ex, inTx, err, took)
	case cut: // put back by a stop out of time while its handler ran: whatever it returned is dropped
		// A committed CompleteTx lands here too when settleTx could not
		// read the job: the job stays COMPLETED (the put-back leaves it),
		// but EventCompleted and its children's EventReleased are not
		// reported, and the Attempt hooks are told it was requeued.
		ex.endedAs(EventRequeued, err, took)
	case released: // its start as a suspect could not be recorded: back to the queue
		ex.endedAs(EventRequeued, err, took)
		_, _ = r.requeue([]*Execution{ex}, time.Time{}, "could not record the start of a rescued job") // logged
	case errors.Is(cause, r.cfg.Errors.Cancelled):
		r.unhold(ex)
		r.stats.cancelled.Add(1)
		ev := ex.event(EventCancelled)
		ev.Duration = took
		ex.endedAs(EventCancelled, err, took)
		r.observe(ev)
		r.jobLogger(&ex.row).Info("queue: job cancelled while running", "duration", took)
	case errors.Is(cause, r.cfg.Errors.LeaseLost):
		r.unhold(ex)
		r.stats.rejected.Add(1)
		ex.endedAs(EventRejected, err, took)
		r.observe(ex.event(EventRejected))
		r.jobLogger(&ex.row).Warn("queue: job lost its lease while running; its result is dropped")
	default:
		res := r.resultOf(ex, e, err, took)
		if ex.end != nil {
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
	} else if r.slotFreed.Swap(false) || r.more.Load() && !r.tight.Load() {
		// Under a tight limit the flush that writes this result wakes the
		// fetch once the slot is free in the database (see flush): a
		// claim now would find it still taken, and hold up that one.
		r.wakeFetch()
	}
}

func (r *Runner) resultOf(ex *Execution, e *Kind, err error, took time.Duration) result {
	res := result{ex: ex, err: err, took: took}
	switch {
	case err == nil:
		res.status = statusCompleted
	case r.cfg.Errors.Permanent(err) || ex.row.Attempts >= ex.row.MaxAttempts:
		res.status = statusFailed
	default:
		res.status = statusQueued
		res.delay = r.delay(ex, e)
	}
	return res
}

// delay is how long the job waits before its next attempt, by its own
// backoff if it has one, else its kind's. A Backoff of the user's that
// panics gets the default's delay, rather than taking the runner down.
func (r *Runner) delay(ex *Execution, e *Kind) time.Duration {
	b := r.cfg.DefaultBackoff
	if e != nil {
		b = e.Backoff
	}
	if len(ex.row.backoffJSON) > 0 {
		own, err := r.cfg.DecodeBackoff(ex.row.backoffJSON)
		if err != nil {
			r.jobLogger(&ex.row).Warn("queue: job's stored backoff does not decode; using its kind's", "err", err)
		} else {
			b = own
		}
	}
	var d time.Duration
	if err := worker.Safely(func() error { d = b.Delay(ex.row.Attempts); return nil }); err != nil {
		r.jobLogger(&ex.row).Error("queue: the job's backoff panicked; using the default's delay", "err", err)
		d = r.cfg.DefaultBackoff.Delay(ex.row.Attempts)
	}
	return max(d, 0)
}

func (ex *Execution) event(t EventType) Event {
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

// Row returns the job as claimed, with the attempt counted. It must not be
// modified.
func (ex *Execution) Row() *Row { return &ex.row }

// Hooked returns the context the Attempt hook made for the attempt, or nil.
func (ex *Execution) Hooked() context.Context { return ex.hooked }

// SetProgress records how many of total records the job has processed. It
// returns an error wrapping Errors.LeaseLost if the job is no longer the
// attempt's.
func (ex *Execution) SetProgress(ctx context.Context, processed, total int64) error {
	return ex.write(ctx, func(ctx context.Context) (bool, error) {
		return ex.r.st.SetProgress(ctx, ex.row.ID, ex.row.Claims, processed, total)
	})
}

// setChunkProgress is SetProgress for a chunked job, saving its chunk
// times too ("" for none: an attempt starts without its predecessors').
func (ex *Execution) setChunkProgress(ctx context.Context, processed, total int64, times []byte) error {
	return ex.write(ctx, func(ctx context.Context) (bool, error) {
		return ex.r.st.SetChunkProgress(ctx, ex.row.ID, ex.row.Claims, processed, total, string(times))
	})
}

// write runs one of the attempt's own writes (see store.SetProgress), bounded
// like a bookkeeping statement; a write that changed nothing found the job
// no longer this attempt's.
func (ex *Execution) write(ctx context.Context, w func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ex.r.timeouts.statement)
	defer cancel()
	changed, err := w(ctx)
	if err != nil {
		return fmt.Errorf("queue: update job %d: %w", ex.row.ID, err)
	}
	if !changed {
		return fmt.Errorf("%w: job %d", ex.r.cfg.Errors.LeaseLost, ex.row.ID)
	}
	return nil
}

// SetOutput stores output, JSON, as the job's output, for its children to
// read. It returns an error wrapping Errors.LeaseLost if the job is no
// longer the attempt's.
func (ex *Execution) SetOutput(ctx context.Context, output string) error {
	return ex.write(ctx, func(ctx context.Context) (bool, error) {
		return ex.r.st.SetOutput(ctx, ex.row.ID, ex.row.Claims, output)
	})
}

// MayHaveOutput reports whether an earlier claim of the job may have left
// output behind. A chunked attempt saves the job's total before it writes
// its first chunk, so one that wrote anything left the total set.
func (ex *Execution) MayHaveOutput() bool {
	return ex.row.Claims > 1 || ex.row.Total != nil
}

// MovedOn reports whether the job has passed from this attempt to another:
// rescued, and queued again or claimed by a later attempt, or completed by
// one. Such an attempt must not clean up its output, which would remove the
// later attempt's; the later attempt cleans up before it starts. A FAILED or
// CANCELLED job has no later attempt to do that, so it has not moved on; nor
// has a job whose row cannot be read.
func (ex *Execution) MovedOn(ctx context.Context) bool {
	st, claims, err := ex.now(ctx)
	if err != nil {
		return false
	}
	return st == statusQueued || st == statusCompleted || (st == statusProcessing && claims != ex.row.Claims)
}

// now reads the job's status and claim number as the database has them.
func (ex *Execution) now(ctx context.Context) (string, int, error) {
	return ex.r.st.State(ctx, ex.row.ID)
}

// cancelRunning cancels the context of every running attempt of a job.
func (r *Runner) cancelRunning(id int64, cause error) {
	r.mu.Lock()
	var exs []*Execution
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

// attemptHooks runs the Attempt hook for ex (Config.Attempt), and returns
// the handler's context; ex.ended calls the function it returned.
func (r *Runner) attemptHooks(ctx context.Context, ex *Execution) context.Context {
	ctx, done := r.cfg.Attempt(ctx, ex)
	ex.end, ex.hooked = done, ctx
	return ctx
}

// ended tells the Attempt hooks that ex's handler returned.
func (ex *Execution) ended(ev Event) {
	if end := ex.end; end != nil {
		ex.end = nil
		end(ev)
	}
}

// endedAs tells the Attempt hooks that ex's handler returned, as an event
// of type t.
func (ex *Execution) endedAs(t EventType, err error, took time.Duration) {
	if ex.end == nil {
		return
	}
	ev := ex.event(t)
	ev.Err, ev.Duration = err, took
	ex.ended(ev)
}

// Jobs reads the jobs with ids into dest, a pointer to a slice of the
// caller's job records, as a handler reads its parents.
func (ex *Execution) Jobs(ctx context.Context, ids []int64, dest any) error {
	return ex.r.cfg.Store.Jobs(ctx, ex.r.cfg.DB, store.Filter{IDs: ids}, 0, dest)
}

// kind looks the kind called name up once, and keeps what it found.
func (r *Runner) kind(name string) (*Kind, error) {
	if k, ok := r.kinds.Load(name); ok {
		return k.(*Kind), nil
	}
	k, err := r.cfg.Kinds.Lookup(name)
	if err != nil {
		return nil, err
	}
	kept, _ := r.kinds.LoadOrStore(name, k)
	return kept.(*Kind), nil
}
