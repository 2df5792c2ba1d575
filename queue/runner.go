package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/worker"
)

// bookkeepingTimeout bounds every statement the runner issues for itself
// (claim, complete, renew, rescue), so a lost database never hangs it.
const bookkeepingTimeout = 15 * time.Second

// Runner claims jobs from the queues it works and runs their handlers,
// WithWorkers at a time. Create one with NewRunner; it starts nothing until
// Start. Several runners, in one process or many, may work the same queues:
// each job is claimed by one of them at a time.
type Runner struct {
	c     *Client
	cfg   config
	log   *slog.Logger
	obs   Observer
	sqlDB *sql.DB

	wake    chan struct{} // coalesced: a fetch is due
	retries chan retryDue // retries written by the completer, for the fetch loop to wake for
	// results carries finished attempts to the completer. It holds a few
	// claims' worth, so that while the completer writes one batch, workers
	// finish the next instead of waiting for room: each statement then
	// writes more results, and claims and results reach the database side
	// by side rather than in turns.
	results chan result
	more    atomic.Bool // the last claim filled every free slot, so more may wait

	// Moving averages, in nanoseconds, of how long handlers run and how
	// long a claim takes: they size the claim-ahead (see capacity).
	jobNanos, claimNanos atomic.Int64

	mu       sync.Mutex
	state    int                     // runnerCreated, runnerStarted, runnerStopped
	running  map[*execution]struct{} // claimed and not finished; two attempts of one job can overlap
	waiting  []*execution            // claimed and not yet taken up by a worker, oldest first
	workable *sync.Cond              // on mu: waiting has jobs, or draining is set
	draining bool                    // no more claims: workers exit once waiting is empty
	arrivals map[string]int          // highest priority notified per queue since the last claim

	stopLoops  context.CancelFunc // fetch loop and listener
	stopMaint  context.CancelFunc // lease renewal and rescue
	cancelJobs context.CancelFunc
	loops      sync.WaitGroup
	maint      sync.WaitGroup
	jobs       sync.WaitGroup
	completer  sync.WaitGroup

	stats runnerCounters
}

const (
	runnerCreated = iota
	runnerStarted
	runnerStopped
)

type runnerCounters struct {
	claimed, completed, retried, failed, cancelled, rescued, requeued, rejected atomic.Int64
}

// RunnerStats counts what a runner has done since it started.
type RunnerStats struct {
	Claimed   int64 // attempts started
	Completed int64
	Retried   int64 // attempts that failed with attempts left
	Failed    int64 // jobs that failed for good
	Cancelled int64 // running jobs stopped by Cancel
	Rescued   int64 // jobs this runner rescued from expired leases (any runner's)
	Requeued  int64 // jobs put back without their attempt counting: by Stop, or claimed ahead and kept waiting (see WithWorkers)
	Rejected  int64 // results dropped because the job was no longer this runner's
	Running   int   // attempts claimed and not finished: running, or claimed ahead and waiting for a worker
}

// NewRunner returns a runner that works jobs of c's registry. Options:
// WithWorkers, WithQueues, WithPollInterval, WithLease, WithRescueInterval,
// WithRunnerID, WithClock, WithLogger and WithObserver (the last two default
// to the client's).
func NewRunner(c *Client, opts ...Option) (*Runner, error) {
	if c == nil {
		return nil, invalid("nil *Client")
	}
	if c.tx {
		return nil, invalid("a runner cannot work inside a transaction; give NewRunner the Client, not Client.Tx")
	}
	cfg := c.cfg
	cfg.workers, cfg.queues, cfg.poll, cfg.lease, cfg.clock = DefaultWorkers, []string{DefaultQueue}, DefaultPollInterval, DefaultLease, SystemClock
	if err := applyOptions(&cfg, opts); err != nil {
		return nil, err
	}
	if cfg.rescueEvery == 0 {
		cfg.rescueEvery = cfg.lease / 2
	}
	if cfg.runnerID == "" {
		cfg.runnerID = defaultRunnerID()
	}
	sqlDB, err := c.db.DB()
	if err != nil {
		return nil, fmt.Errorf("queue: new runner: %w", err)
	}
	if max := sqlDB.Stats().MaxOpenConnections; max > 0 && max < 4 {
		return nil, invalid("the connection pool allows %d connections; a runner needs at least 4 (listener, claims, completions, maintenance) plus what its handlers use", max)
	}
	r := &Runner{
		c: c, cfg: cfg, log: cfg.logger.With("runner", cfg.runnerID), obs: cfg.observer, sqlDB: sqlDB,
		wake:     make(chan struct{}, 1),
		retries:  make(chan retryDue, 1024),
		results:  make(chan result, 4*cfg.workers), // see results
		running:  map[*execution]struct{}{},
		arrivals: map[string]int{},
	}
	r.workable = sync.NewCond(&r.mu)
	return r, nil
}

func defaultRunnerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID returns the name the runner locks jobs with.
func (r *Runner) ID() string { return r.cfg.runnerID }

// Start starts claiming and working jobs. ctx is the parent of every job's
// context; cancelling it cancels running jobs, which then retry, and the
// runner claims no more (it would only fail what it claimed); Stop stops
// it. Start returns ErrStarted if called twice or after Stop.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerCreated {
		return ErrStarted
	}
	r.state = runnerStarted
	jobsCtx, cancelJobs := context.WithCancel(ctx)
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	maintCtx, stopMaint := context.WithCancel(context.WithoutCancel(ctx))
	r.cancelJobs, r.stopLoops, r.stopMaint = cancelJobs, stopLoops, stopMaint

	r.completer.Add(1)
	go r.complete()
	// Long-lived workers rather than a goroutine per job: their stacks stay
	// grown, and a no-op job costs a channel receive.
	r.jobs.Add(r.cfg.workers)
	for range r.cfg.workers {
		go r.work()
	}
	r.loops.Add(3)
	go r.fetchLoop(loopsCtx, jobsCtx)
	go r.listen(loopsCtx)
	go r.schedule(loopsCtx)
	r.maint.Add(1)
	go r.maintain(maintCtx)
	r.log.Info("queue: runner started", "workers", r.cfg.workers, "queues", r.cfg.queues)
	return nil
}

// Stop stops the runner: it claims nothing more and waits for running jobs
// to finish and their results to be written. If ctx ends first, the contexts
// of jobs still running are cancelled (cause ErrStopping), and once their
// handlers have returned (whatever they return is ignored) the jobs go back
// to the queue without their attempt counting; then Stop returns an error
// wrapping ctx.Err(). A job is put back only after its handler returned, so
// no other runner starts it while this one is still winding it down. When
// Stop returns, no job is left PROCESSING by this runner unless the database
// could not be reached.
// Stop is idempotent and safe without Start.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	was := r.state
	r.state = runnerStopped
	r.mu.Unlock()
	if was != runnerStarted {
		if was == runnerStopped {
			r.waitStopped()
		}
		return nil
	}
	r.stopLoops()
	r.loops.Wait() // no more claims; every claimed job has been launched
	r.mu.Lock()
	r.draining = true // the workers exit once they have run what was launched
	r.workable.Broadcast()
	r.mu.Unlock()

	jobsDone := make(chan struct{})
	go func() { r.jobs.Wait(); close(jobsDone) }()
	var stopErr error
	select {
	case <-jobsDone:
	case <-ctx.Done():
		// Jobs that never started go back now; the others each as its
		// handler returns (see finish), their leases renewed till then.
		r.requeue(r.releaseRunning(), "stop ran out of time")
		r.cancelJobs()
		<-jobsDone
		stopErr = fmt.Errorf("queue: stop: %w", ctx.Err())
	}
	r.stopMaint()
	r.maint.Wait()
	close(r.results)
	r.completer.Wait()
	r.cancelJobs()
	r.log.Info("queue: runner stopped")
	return stopErr
}

// waitStopped lets a second Stop return only after the first has finished.
func (r *Runner) waitStopped() { r.completer.Wait() }

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats {
	r.mu.Lock()
	n := len(r.running)
	r.mu.Unlock()
	return RunnerStats{
		Claimed: r.stats.claimed.Load(), Completed: r.stats.completed.Load(), Retried: r.stats.retried.Load(),
		Failed: r.stats.failed.Load(), Cancelled: r.stats.cancelled.Load(), Rescued: r.stats.rescued.Load(),
		Requeued: r.stats.requeued.Load(), Rejected: r.stats.rejected.Load(), Running: n,
	}
}

// heldConn is a connection a loop keeps for itself, so that its statements
// neither wait for the pool nor churn it: database/sql keeps only two idle
// connections unless told otherwise, and a busy runner's claims and
// completions would otherwise open and close connections all the time. It is
// dropped after an error and taken again on the next statement.
type heldConn struct {
	db   *sql.DB
	conn *sql.Conn
	// setup, if set, runs on each new connection, which is then never
	// handed back to the pool: its session settings are this loop's own.
	setup string
}

func (h *heldConn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if h.conn == nil {
		c, err := h.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		h.conn = c
		if h.setup != "" {
			if _, err := c.ExecContext(ctx, h.setup); err != nil {
				h.close()
				return nil, err
			}
		}
	}
	rows, err := h.conn.QueryContext(ctx, query, args...)
	if err != nil {
		h.close()
	}
	return rows, err
}

func (h *heldConn) failed(err error) {
	if err != nil {
		h.close()
	}
}

func (h *heldConn) close() {
	if h.conn == nil {
		return
	}
	if h.setup != "" {
		// Discard the connection instead of pooling it with our settings.
		_ = h.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = h.conn.Close()
	h.conn = nil
}

// collectIDs marks in into every ID that rows return, and closes rows.
func collectIDs(rows *sql.Rows, into map[int64]bool) error {
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		into[id] = true
	}
	return rows.Err()
}

// retryBookkeeping runs op with a bounded context a few times, so a brief
// database hiccup does not lose a runner's bookkeeping.
func retryBookkeeping(op func(ctx context.Context) error) error {
	var err error
	for i, wait := range []time.Duration{0, 50 * time.Millisecond, 250 * time.Millisecond, time.Second} {
		if i > 0 {
			time.Sleep(wait) // a pause between attempts at a failing database, not synchronisation
		}
		ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
		err = op(ctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// releaseRunning, for a Stop that ran out of time, marks the attempts still
// running as released and cancels them: finish then puts each back in the
// queue once its handler has returned, instead of writing its result. It
// takes the attempts still waiting for a worker out of the workers' reach
// and returns them, to be put back at once.
func (r *Runner) releaseRunning() []*execution {
	r.mu.Lock()
	waiting := r.unwait(func(*execution) bool { return true })
	var running []*execution
	for ex := range r.running {
		if !ex.finished && !ex.released {
			ex.released = true
			running = append(running, ex)
		}
	}
	r.mu.Unlock()
	for _, ex := range append(running, waiting...) {
		ex.cancel(ErrStopping)
	}
	return waiting
}

// requeueAttemptsSQL puts attempts' jobs back in the queue without counting the
// attempt, each only while that attempt holds it, keeping its run time (and
// so its place in the queue), and returns the IDs it put back.
var requeueAttemptsSQL = `
WITH d AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS d(id, attempt)),
req AS (
	UPDATE sheaf_jobs j SET status = 'QUEUED', attempts = j.attempts - 1, locked_until = NULL, locked_by = NULL
	FROM d WHERE j.id = ANY($1) AND j.id = d.id AND j.status = 'PROCESSING' AND j.attempts = d.attempt
	RETURNING j.id, j.queue, j.priority, j.run_at, j.status
), notified AS (` + notifyDueSQL("req") + `)
SELECT req.id FROM req, notified`

// requeue puts released attempts' jobs back in the queue without counting
// the attempt. The next attempt then has the same number; none of the
// released ones can still write, because their handlers have returned or
// never started. A job that is no longer the attempt's (cancelled, or
// rescued) stays as it is; a cancelled one is reported as such.
func (r *Runner) requeue(exs []*execution, why string) {
	if len(exs) == 0 {
		return
	}
	ids, attempts := make([]int64, len(exs)), make([]int32, len(exs))
	for i, ex := range exs {
		ids[i], attempts[i] = ex.row.ID, int32(ex.row.Attempts)
	}
	back := map[int64]bool{}
	err := retryBookkeeping(func(ctx context.Context) error {
		rows, err := r.sqlDB.QueryContext(ctx, requeueAttemptsSQL, ids, attempts)
		if err != nil {
			return err
		}
		return collectIDs(rows, back)
	})
	if err != nil {
		r.log.Error("queue: could not put jobs back in the queue; they will be rescued when their leases expire", "why", why, "jobs", len(ids), "err", err)
		return
	}
	for _, ex := range exs {
		switch {
		case back[ex.row.ID]:
			r.stats.requeued.Add(1)
			r.observe(ex.event(EventRequeued))
		case errors.Is(context.Cause(ex.ctx), ErrCancelled):
			r.stats.cancelled.Add(1)
			r.observe(ex.event(EventCancelled))
		}
	}
	if len(back) > 0 {
		r.log.Warn("queue: jobs put back in the queue", "why", why, "jobs", len(back))
	}
}

// debug logs at Debug level about a job, building the job's logger only if
// the line will be written: most jobs are never logged.
func (r *Runner) debug(ex *execution, msg string, args ...any) {
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.jobLogger(&ex.row).Debug(msg, args...)
	}
}

func (r *Runner) jobLogger(row *JobRecord) *slog.Logger {
	l := r.log.With("job_id", row.ID, "kind", row.Kind, "attempt", row.Attempts)
	if row.CorrelationID != nil {
		l = l.With("correlation_id", *row.CorrelationID)
	}
	return l
}

func (r *Runner) observe(e Event) {
	if r.obs == nil {
		return
	}
	if err := worker.Safely(func() error { r.obs.Observe(e); return nil }); err != nil {
		r.log.Error("queue: observer panicked", "err", err)
	}
}
