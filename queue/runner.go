package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sheaf-dev/sheaf/worker"
)

// ErrTimeout is the cause of a job context cancelled by the kind's Timeout.
var ErrTimeout = errors.New("queue: job timed out")

// bookkeepingTimeout bounds every statement the runner issues for itself
// (claim, complete, renew, rescue), so a lost database never hangs it.
const bookkeepingTimeout = 15 * time.Second

// maxFlush caps the completions written by one statement.
const maxFlush = 2000

// claimCooldown is how long the fetch loop may wait for more slots to free
// up before claiming for only some of them, while more jobs are likely
// waiting. Each claim costs a statement and a commit; claiming for every
// slot at once spreads that over many jobs, and short jobs free their slots
// within this time anyway. Long jobs lose at most this much per claim.
const claimCooldown = 2 * time.Millisecond

// completeLinger is how long the completer waits for more results when it
// has fewer than batch of them and jobs are running.
var completeLinger = struct {
	wait  time.Duration
	batch int
}{time.Millisecond, 50}

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

	wake    chan struct{}   // coalesced: a fetch is due
	retries chan retryDue   // retries written by the completer, for the fetch loop to wake for
	todo    chan *execution // claimed attempts, for the workers
	results chan result     // finished attempts, for the completer
	more    atomic.Bool     // the last claim filled every free slot, so more may wait

	mu       sync.Mutex
	state    int                  // runnerCreated, runnerStarted, runnerStopped
	running  map[int64]*execution // by attempt key (keyOf): two attempts of one job can overlap
	arrivals map[string]int       // highest priority notified per queue since the last claim

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
	Requeued  int64 // running jobs put back by Stop
	Rejected  int64 // results dropped because the job was no longer this runner's
	Running   int   // attempts in progress now
}

// NewRunner returns a runner that works jobs of c's registry. Options:
// WithWorkers, WithQueues, WithPollInterval, WithLease, WithRescueInterval,
// WithRunnerID, WithLogger and WithObserver (the last two default to the
// client's).
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
	return &Runner{
		c: c, cfg: cfg, log: cfg.logger.With("runner", cfg.runnerID), obs: cfg.observer, sqlDB: sqlDB,
		wake:     make(chan struct{}, 1),
		retries:  make(chan retryDue, 1024),
		todo:     make(chan *execution, cfg.workers),
		results:  make(chan result, cfg.workers),
		running:  map[int64]*execution{},
		arrivals: map[string]int{},
	}, nil
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
// context; cancelling it cancels running jobs, which then retry, but keeps
// the runner going: Stop stops it. Start returns ErrStarted if called twice
// or after Stop.
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
// to finish and their results to be written. If ctx ends first, jobs still
// running go back to the queue without their attempt counting, their
// contexts are cancelled (cause ErrStopping), and Stop waits for their
// handlers to return before it returns an error wrapping ctx.Err(); whatever
// they return then is ignored. So when Stop returns, no job is left
// PROCESSING by this runner unless the database could not be reached.
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
	close(r.todo)  // the workers exit once they have run what was launched

	jobsDone := make(chan struct{})
	go func() { r.jobs.Wait(); close(jobsDone) }()
	var stopErr error
	select {
	case <-jobsDone:
	case <-ctx.Done():
		r.requeueRunning()
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

func (r *Runner) wakeFetch() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// retryDue is a retried job's due time, so the fetch loop can wake for it
// rather than wait for its next poll.
type retryDue struct {
	at       time.Time
	queue    string
	priority int
}

// fetchLoop claims jobs when woken (a notification, or a freed slot while
// more jobs may wait), when a retry falls due, or when the poll interval
// passes.
func (r *Runner) fetchLoop(ctx, jobsCtx context.Context) {
	defer r.loops.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	f := fetcher{r: r, conn: heldConn{db: r.sqlDB}, cursors: map[string]*cursor{}}
	defer f.conn.close()
	var due []retryDue // kept short: a flood of retries is found by polling anyway
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		case d := <-r.retries:
			if len(due) < 1024 {
				due = append(due, d)
			}
		}
		now := time.Now()
		kept := due[:0]
		for _, d := range due {
			if d.at.After(now) {
				kept = append(kept, d)
				continue
			}
			// The retry is due: claim now, and look above the cursor for it.
			r.noteArrival(d.queue, d.priority)
			r.wakeFetch()
		}
		due = kept
		wait := f.fetch(ctx, jobsCtx)
		if wait == 0 {
			wait = r.cfg.poll
		}
		for _, d := range due {
			wait = min(wait, max(d.at.Sub(now), 0))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

type fetcher struct {
	r         *Runner
	conn      heldConn
	turn      int // which queue goes first, so one busy queue does not starve the others
	lastClaim time.Time
	cursors   map[string]*cursor
}

// fetch claims until the slots are full or the queues have nothing due. It
// returns how soon to try again when it held back (see claimCooldown), or 0.
func (f *fetcher) fetch(ctx, jobsCtx context.Context) time.Duration {
	r := f.r
	for ctx.Err() == nil {
		free := r.freeSlots()
		if free == 0 {
			return 0 // a finishing job wakes the loop
		}
		if r.more.Load() && free < r.cfg.workers {
			if since := time.Since(f.lastClaim); since < claimCooldown {
				return claimCooldown - since
			}
		}
		got := 0
		closedQueues, closedKinds := r.c.reg.closedNow(r.cfg.clock.Now(), r.cfg.queues)
		for i := range r.cfg.queues {
			q := r.cfg.queues[(f.turn+i)%len(r.cfg.queues)]
			n := r.freeSlots()
			if n == 0 {
				break
			}
			if closedQueues[q] {
				continue // outside its window; the poll comes back for it
			}
			cur := f.cursors[q]
			if cur != nil && time.Now().After(cur.until) {
				cur = nil // rescan from the start now and then; see claimFromSQL
			}
			higher := cur != nil && r.notifiedAbove(q, cur.priority)
			rows, err := r.claim(ctx, &f.conn, q, n, cur, higher, closedKinds)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("queue: claim failed", "queue", q, "err", err)
				}
				return 0
			}
			for i := range rows {
				r.launch(jobsCtx, &rows[i])
			}
			got += len(rows)
			switch {
			case len(rows) < n:
				delete(f.cursors, q) // reached the end: next time from the start
			case cur == nil:
				last := rows[len(rows)-1]
				f.cursors[q] = &cursor{priority: last.Priority, runAt: last.RunAt, id: last.ID, until: time.Now().Add(r.cfg.poll)}
			default:
				last := rows[len(rows)-1]
				cur.priority, cur.runAt, cur.id = last.Priority, last.RunAt, last.ID
			}
		}
		f.turn++
		f.lastClaim = time.Now()
		r.more.Store(got == free)
		if got < free {
			return 0
		}
	}
	return 0
}

func (r *Runner) freeSlots() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.workers - len(r.running)
}

const claimSQL = `
WITH c AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND queue = $1 AND run_at <= now() AND NOT kind = ANY($5)
	ORDER BY priority DESC, run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE sheaf_jobs j SET status = 'PROCESSING', attempts = j.attempts + 1, started_at = now(),
	locked_until = now() + $3 * interval '1 millisecond', locked_by = $4, output = NULL
FROM c WHERE j.id = c.id
RETURNING ` + claimColumns

const claimColumns = `j.id, j.kind, j.queue, j.priority, j.payload, j.correlation_id, j.attempts,
	j.max_attempts, j.backoff, j.created_at, j.started_at, j.auth, j.run_at, j.run_id, j.period, j.parent_ids`

// claimFromSQL claims like claimSQL, but continues from a cursor (the last
// position claimed) instead of scanning the claim index from its start. On a
// busy queue the start of the index is a long run of entries for jobs
// claimed since the table was last vacuumed; every claim from the start
// steps over all of them, which costs milliseconds per claim on a backlog of
// a hundred thousand jobs. The branches are CTEs, which PostgreSQL reads
// only as far as the LIMIT needs: higher priorities (only when a
// notification said one arrived, $5), then the cursor's priority onward,
// then lower priorities.
const claimFromSQL = `
WITH higher AS (
	SELECT id FROM sheaf_jobs
	WHERE $5 AND status = 'QUEUED' AND queue = $1 AND run_at <= now() AND priority > $6 AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), onward AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND queue = $1 AND run_at <= now() AND priority = $6 AND (run_at, id) > ($7, $8)
		AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), lower AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND queue = $1 AND run_at <= now() AND priority < $6 AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), c AS (
	SELECT id FROM higher UNION ALL SELECT id FROM onward UNION ALL SELECT id FROM lower LIMIT $2
)
UPDATE sheaf_jobs j SET status = 'PROCESSING', attempts = j.attempts + 1, started_at = now(),
	locked_until = now() + $3 * interval '1 millisecond', locked_by = $4, output = NULL
FROM c WHERE j.id = c.id
RETURNING ` + claimColumns

// cursor is where a runner's last claim on a queue stopped, in claim order.
type cursor struct {
	priority int
	runAt    time.Time
	id       int64
	until    time.Time // rescan from the start after this
}

// claim locks up to n due jobs of queue for this runner, counting their
// attempt now, so that a job that crashes its runner still runs out of
// attempts. With a cursor it continues from it; see claimFromSQL.
func (r *Runner) claim(ctx context.Context, conn *heldConn, queue string, n int, cur *cursor, higher bool, closedKinds []string) (out []JobRecord, err error) {
	// Not cancelled by Stop: a claim cancelled after the server committed it
	// would leave its jobs PROCESSING with nobody running them until their
	// leases expired. Stop waits for it instead, then runs or requeues them.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	var rows *sql.Rows
	if closedKinds == nil {
		closedKinds = []string{}
	}
	if cur == nil {
		rows, err = conn.query(ctx, claimSQL, queue, n, r.cfg.lease.Milliseconds(), r.cfg.runnerID, closedKinds)
	} else {
		rows, err = conn.query(ctx, claimFromSQL, queue, n, r.cfg.lease.Milliseconds(), r.cfg.runnerID,
			higher, cur.priority, cur.runAt, cur.id, closedKinds)
	}
	if err != nil {
		return nil, err
	}
	defer func() { conn.failed(err) }()
	defer rows.Close()
	out = make([]JobRecord, 0, n)
	for rows.Next() {
		var j JobRecord
		var payload, backoff, auth []byte
		if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Priority, &payload, &j.CorrelationID, &j.Attempts,
			&j.MaxAttempts, &backoff, &j.CreatedAt, &j.StartedAt, &auth, &j.RunAt, &j.RunID, &j.Period, &j.ParentIDs); err != nil {
			return nil, err
		}
		j.Status, j.Payload = StatusProcessing, payload
		if len(auth) > 0 {
			if err := json.Unmarshal(auth, &j.Auth); err != nil {
				r.log.Warn("queue: job has an auth context that does not decode", "job_id", j.ID, "err", err)
			}
		}
		if len(backoff) > 0 {
			j.backoffJSON = backoff
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// In claim order: priority, run time, ID. Workers start them in this
	// order, and the last one is the cursor.
	slices.SortFunc(out, func(a, b JobRecord) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	r.stats.claimed.Add(int64(len(out)))
	return out, nil
}

// execution is one attempt of one job on this runner.
type execution struct {
	r      *Runner
	row    JobRecord
	ctx    context.Context // cancelled with a cause; handed to the handler
	cancel context.CancelCauseFunc
	start  time.Time
	// Guarded by r.mu: released means Stop put the job back in the queue,
	// so its result must be dropped; finished means its result is written
	// or on its way.
	released, finished bool
}

// launch hands a claimed job to the workers. It never blocks: a job is
// claimed only for a free slot, and todo has a place per slot.
func (r *Runner) launch(jobsCtx context.Context, row *JobRecord) {
	ctx, cancel := context.WithCancelCause(jobsCtx)
	ex := &execution{r: r, row: *row, ctx: ctx, cancel: cancel, start: time.Now()}
	r.mu.Lock()
	r.running[keyOf(ex)] = ex
	r.mu.Unlock()
	r.todo <- ex
}

func (r *Runner) work() {
	defer r.jobs.Done()
	for ex := range r.todo {
		r.execute(ex.ctx, ex)
	}
}

// errGoexit is the error of an attempt whose handler called runtime.Goexit.
var errGoexit = errors.New("queue: handler called runtime.Goexit")

func (r *Runner) execute(ctx context.Context, ex *execution) {
	defer ex.cancel(nil)
	r.observe(ex.event(EventStarted))
	r.debug(ex, "queue: job started")

	var err error
	e, lookupErr := r.c.reg.lookup(ex.row.Kind)
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
	r.finish(ctx, ex, e, err, time.Since(ex.start))
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
	case released: // Stop requeued it and reported it
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
	delete(r.running, keyOf(ex))
	r.mu.Unlock()
	if r.more.Load() {
		r.wakeFetch()
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
}

func (h *heldConn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if h.conn == nil {
		c, err := h.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		h.conn = c
	}
	rows, err := h.conn.QueryContext(ctx, query, args...)
	if err != nil {
		h.close()
	}
	return rows, err
}

// failed drops the connection after an error seen while reading rows.
func (h *heldConn) failed(err error) {
	if err != nil {
		h.close()
	}
}

func (h *heldConn) close() {
	if h.conn != nil {
		_ = h.conn.Close()
		h.conn = nil
	}
}

// result is a finished attempt on its way to the database.
type result struct {
	ex     *execution
	status Status // COMPLETED, QUEUED (retry) or FAILED
	delay  time.Duration
	err    error
	took   time.Duration
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

// complete writes finished attempts, many per statement: whatever has
// arrived while the previous statement ran goes into the next.
func (r *Runner) complete() {
	defer r.completer.Done()
	conn := &heldConn{db: r.sqlDB}
	defer conn.close()
	batch := make([]result, 0, maxFlush)
	linger := time.NewTimer(0)
	defer linger.Stop()
	for res := range r.results {
		batch = append(batch[:0], res)
		// Gather what is there; while the batch is small and jobs are
		// running, wait a moment for their results too. A statement and a
		// commit per handful of jobs would cost more than the wait.
		lingering := false
	drain:
		for len(batch) < maxFlush {
			select {
			case more, ok := <-r.results:
				if !ok {
					break drain
				}
				batch = append(batch, more)
				continue
			default:
			}
			if lingering || len(batch) >= completeLinger.batch || r.Stats().Running == 0 {
				break
			}
			lingering = true
			linger.Reset(completeLinger.wait)
			select {
			case more, ok := <-r.results:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			case <-linger.C:
				break drain
			}
		}
		r.flush(conn, batch)
	}
}

// An attempt is named by its job ID and attempt number, packed into one
// number (attempts never exceed 1000) so the guard is one hashed = ANY.
const attemptKey = "id * 1024 + attempts"

func keyOf(ex *execution) int64 { return ex.row.ID*1024 + int64(ex.row.Attempts) }

// completeSQL finishes successful attempts: the bulk of all results, so it
// carries nothing per row but the IDs and their attempt keys, and the
// planner reaches the rows through the primary key.
const completeSQL = `
UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = now(), locked_until = NULL, locked_by = NULL
WHERE id = ANY($1) AND ` + attemptKey + ` = ANY($2) AND status = 'PROCESSING'
RETURNING id`

// failSQL finishes failed attempts: each goes back to the queue after its
// delay, or fails for good, with its error. Rows look up their values by
// position in the arrays rather than by a join, which the planner would get
// wrong; batches are kept small for that.
const failSQL = `
UPDATE sheaf_jobs j SET
	status = ($3::text[])[array_position($1::bigint[], j.id)],
	run_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED'
		THEN now() + ($4::bigint[])[array_position($1::bigint[], j.id)] * interval '1 microsecond' ELSE j.run_at END,
	completed_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED' THEN NULL ELSE now() END,
	last_error = ($5::text[])[array_position($1::bigint[], j.id)],
	locked_until = NULL, locked_by = NULL
WHERE j.id = ANY($1) AND ` + attemptKey + ` = ANY($2) AND j.status = 'PROCESSING'
RETURNING j.id`

const maxFailFlush = 200

// flush writes a batch of results. The updates only touch a job that is
// still PROCESSING in the same attempt, so a result that arrives after the
// job was rescued or cancelled changes nothing.
func (r *Runner) flush(conn *heldConn, batch []result) {
	accepted := map[int64]bool{}
	var ok, failed, parents []result
	for _, res := range batch {
		switch {
		case res.status != StatusCompleted:
			failed = append(failed, res)
		case len(r.c.reg.rulesFor(res.ex.row.Kind)) > 0:
			parents = append(parents, res)
		default:
			ok = append(ok, res)
		}
	}
	var errs []error
	for _, res := range parents {
		errs = append(errs, r.completeParent(res, accepted))
	}
	if len(ok) > 0 {
		ids, keys := make([]int64, len(ok)), make([]int64, len(ok))
		for i, res := range ok {
			ids[i], keys[i] = res.ex.row.ID, keyOf(res.ex)
		}
		errs = append(errs, r.writeResults(conn, completeSQL, accepted, ids, keys))
	}
	for start := 0; start < len(failed); start += maxFailFlush {
		part := failed[start:min(start+maxFailFlush, len(failed))]
		n := len(part)
		ids, keys, statuses, delays, msgs := make([]int64, n), make([]int64, n), make([]string, n), make([]int64, n), make([]string, n)
		for i, res := range part {
			ids[i], keys[i], statuses[i] = res.ex.row.ID, keyOf(res.ex), string(res.status)
			delays[i], msgs[i] = res.delay.Microseconds(), res.err.Error()
		}
		errs = append(errs, r.writeResults(conn, failSQL, accepted, ids, keys, statuses, delays, msgs))
	}
	if err := errors.Join(errs...); err != nil {
		// The jobs stay PROCESSING; once their leases expire they are
		// rescued and run again. At least once, never lost.
		r.log.Error("queue: could not record finished jobs; they will be rescued when their leases expire",
			"jobs", len(batch), "err", err)
	}
	for _, res := range batch {
		// A job whose statement failed has no entry: it is neither
		// completed nor rejected, but waiting to be rescued.
		if written, known := accepted[res.ex.row.ID]; known {
			r.report(res, written)
		}
	}
}

// completeParent completes a job that is a parent in some rule, releasing
// children in the same transaction (see Rule), and marks it in accepted.
func (r *Runner) completeParent(res result, accepted map[int64]bool) error {
	rules := r.c.reg.rulesFor(res.ex.row.Kind)
	var released []releasedJob
	err := retryBookkeeping(func(ctx context.Context) error {
		ok, children, err := r.completeReleasing(ctx, res, rules)
		accepted[res.ex.row.ID], released = ok, children
		return err
	})
	if err != nil {
		delete(accepted, res.ex.row.ID)
		return err
	}
	for _, c := range released {
		r.observe(Event{Type: EventReleased, JobID: c.job.ID, Kind: c.job.Kind, ParentIDs: c.job.ParentIDs, Rule: c.rule})
		r.debug(res.ex, "queue: job released a dependent job", "rule", c.rule, "child_id", c.job.ID, "child_kind", c.job.Kind)
	}
	return nil
}

// writeResults runs a finishing statement and marks the IDs it returned in
// accepted; an ID it did not return is marked false.
func (r *Runner) writeResults(conn *heldConn, query string, accepted map[int64]bool, args ...any) error {
	ids := args[0].([]int64)
	err := retryBookkeeping(func(ctx context.Context) (err error) {
		rows, err := conn.query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer func() { conn.failed(err) }()
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			accepted[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !accepted[id] {
			accepted[id] = false
		}
	}
	return nil
}

func (r *Runner) report(res result, accepted bool) {
	ev := res.ex.event(EventCompleted)
	ev.Duration, ev.Err = res.took, res.err
	switch {
	case !accepted:
		r.stats.rejected.Add(1)
		ev.Type = EventRejected
		r.jobLogger(&res.ex.row).Warn("queue: job finished after it stopped being this runner's (rescued or cancelled); result dropped", "status", res.status)
	case res.status == StatusCompleted:
		r.stats.completed.Add(1)
		r.debug(res.ex, "queue: job completed", "duration", res.took)
	case res.status == StatusQueued:
		r.stats.retried.Add(1)
		ev.Type, ev.RetryIn = EventRetrying, res.delay
		select {
		case r.retries <- retryDue{at: time.Now().Add(res.delay), queue: res.ex.row.Queue, priority: res.ex.row.Priority}:
		default: // the fetch loop is behind; its poll finds the job
		}
		r.jobLogger(&res.ex.row).Warn("queue: job failed; will retry", "err", res.err, "retry_in", res.delay)
	default:
		r.stats.failed.Add(1)
		ev.Type = EventFailed
		r.jobLogger(&res.ex.row).Error("queue: job failed for good", "err", res.err, "permanent", IsPermanent(res.err))
	}
	r.observe(ev)
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

// requeueRunning puts the jobs still running back in the queue without
// counting their attempt, for a Stop that ran out of time.
func (r *Runner) requeueRunning() {
	r.mu.Lock()
	var ids []int64
	var attempts []int32
	var exs []*execution
	for _, ex := range r.running {
		if ex.finished {
			continue
		}
		ex.released = true
		ids, attempts, exs = append(ids, ex.row.ID), append(attempts, int32(ex.row.Attempts)), append(exs, ex)
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	err := retryBookkeeping(func(ctx context.Context) error {
		_, err := r.sqlDB.ExecContext(ctx, `
WITH d AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS d(id, attempt)),
req AS (
	UPDATE sheaf_jobs j SET status = 'QUEUED', attempts = j.attempts - 1, run_at = now(),
		locked_until = NULL, locked_by = NULL
	FROM d WHERE j.id = ANY($1) AND j.id = d.id AND j.status = 'PROCESSING' AND j.attempts = d.attempt
	RETURNING j.queue, j.priority, j.run_at, j.status
)
`+notifyDueSQL("req"), ids, attempts)
		return err
	})
	if err != nil {
		r.log.Error("queue: stop could not put running jobs back; they will be rescued when their leases expire", "jobs", len(ids), "err", err)
		return
	}
	for _, ex := range exs {
		r.stats.requeued.Add(1)
		r.observe(ex.event(EventRequeued))
		ex.cancel(ErrStopping)
	}
	r.log.Warn("queue: stop ran out of time; running jobs put back in the queue", "jobs", len(ids))
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

// cancelRunning cancels the context of every running attempt of a job.
func (r *Runner) cancelRunning(id int64, cause error) {
	r.mu.Lock()
	var exs []*execution
	for _, ex := range r.running {
		if ex.row.ID == id {
			exs = append(exs, ex)
		}
	}
	r.mu.Unlock()
	for _, ex := range exs {
		ex.cancel(cause)
	}
}

// listen keeps a connection LISTENing for new jobs and cancellations,
// reconnecting when it breaks. Polling covers the gaps.
func (r *Runner) listen(ctx context.Context) {
	defer r.loops.Done()
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("queue: listener connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *Runner) listenOnce(ctx context.Context) error {
	conn, err := r.sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("queue: the listener needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		var schema string
		if err := pc.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return err
		}
		if _, err := pc.Exec(ctx, "LISTEN sheaf_jobs; LISTEN sheaf_cancel"); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		r.wakeFetch() // jobs may have arrived while the listener was down
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection was listening; never hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			rest, ours := strings.CutPrefix(n.Payload, schema+":")
			if !ours {
				continue // another schema's queue
			}
			switch n.Channel {
			case "sheaf_jobs":
				q, prio := parseNotice(rest)
				if slices.Contains(r.cfg.queues, q) {
					r.noteArrival(q, prio)
					r.wakeFetch()
				}
			case "sheaf_cancel":
				if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
					r.cancelRunning(id, ErrCancelled)
				}
			}
		}
	})
}

// maintain renews the leases of running jobs and rescues expired ones.
func (r *Runner) maintain(ctx context.Context) {
	defer r.maint.Done()
	renew := time.NewTicker(r.cfg.lease / 3)
	defer renew.Stop()
	rescue := time.NewTicker(r.cfg.rescueEvery)
	defer rescue.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			r.renew(ctx)
		case <-rescue.C:
			r.rescue(ctx)
		}
	}
}

func (r *Runner) renew(ctx context.Context) {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.running))
	keys := make([]int64, 0, len(r.running))
	for key, ex := range r.running {
		if !ex.released && !ex.finished {
			ids, keys = append(ids, ex.row.ID), append(keys, key)
		}
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, `UPDATE sheaf_jobs SET locked_until = now() + $1 * interval '1 millisecond'
		WHERE id = ANY($2) AND `+attemptKey+` = ANY($3) AND status = 'PROCESSING' AND locked_by = $4
		RETURNING `+attemptKey, r.cfg.lease.Milliseconds(), ids, keys, r.cfg.runnerID)
	if err != nil {
		r.log.Error("queue: lease renewal failed", "jobs", len(ids), "err", err)
		return
	}
	kept := map[int64]bool{}
	for rows.Next() {
		var key int64
		if rows.Scan(&key) == nil {
			kept[key] = true
		}
	}
	rows.Close()
	for i, key := range keys {
		if !kept[key] {
			r.lost(ctx, ids[i], key)
		}
	}
}

// lost handles a running attempt whose row no longer names it: the job was
// cancelled (and the notification missed), or rescued (and perhaps claimed
// again, as a later attempt).
func (r *Runner) lost(ctx context.Context, id, key int64) {
	var st Status
	var attempts int
	err := r.sqlDB.QueryRowContext(ctx, "SELECT status, attempts FROM sheaf_jobs WHERE id = $1", id).Scan(&st, &attempts)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return // unsure; look again at the next renewal
	}
	r.mu.Lock()
	ex := r.running[key]
	finished := ex == nil || ex.finished
	r.mu.Unlock()
	if finished {
		return // it ended meanwhile; its result is on its way
	}
	if st == StatusCancelled && attempts == ex.row.Attempts {
		ex.cancel(ErrCancelled)
	} else {
		ex.cancel(ErrLeaseLost)
	}
}

// rescueSQL takes jobs whose lease expired back from their runner: see rescue.
var rescueSQL = `
WITH expired AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'PROCESSING' AND locked_until < now()
	ORDER BY locked_until
	LIMIT 1000
	FOR UPDATE SKIP LOCKED
), rescued AS (
	UPDATE sheaf_jobs j SET
		status = CASE WHEN j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
		completed_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
		run_at = now(),
		last_error = 'lease expired: runner ' || coalesce(j.locked_by, '?') || ' stopped renewing it (it crashed, hung or lost the database)',
		locked_until = NULL, locked_by = NULL
	FROM expired WHERE j.id = expired.id
	RETURNING j.id, j.kind, j.queue, j.status, j.attempts, j.max_attempts, j.correlation_id, j.priority, j.run_at
), notified AS (` + notifyDueSQL("rescued") + `)
SELECT rescued.id, rescued.kind, rescued.queue, rescued.status, rescued.attempts, rescued.max_attempts, rescued.correlation_id
FROM rescued, notified`

// rescue returns jobs whose lease expired to the queue, or fails them if
// they have used their attempts. Any runner rescues any runner's jobs;
// SKIP LOCKED keeps two rescuers from fighting.
func (r *Runner) rescue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, rescueSQL)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("queue: rescue failed", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var row JobRecord
		if err := rows.Scan(&row.ID, &row.Kind, &row.Queue, &row.Status, &row.Attempts, &row.MaxAttempts, &row.CorrelationID); err != nil {
			r.log.Error("queue: rescue failed", "err", err)
			return
		}
		r.stats.rescued.Add(1)
		ex := &execution{row: row}
		r.observe(ex.event(EventRescued))
		r.jobLogger(&row).Warn("queue: rescued a job whose lease expired", "now", row.Status)
	}
}

// parseNotice reads a new-jobs notification, schema removed: "queue:priority",
// the highest priority among the jobs that became due. A payload without a
// priority counts as the highest.
func parseNotice(payload string) (queue string, priority int) {
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return payload, MaxPriority
	}
	p, err := strconv.Atoi(payload[i+1:])
	if err != nil {
		return payload, MaxPriority
	}
	return payload[:i], p
}

func (r *Runner) noteArrival(queue string, priority int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivals[queue] = max(r.arrivals[queue], priority)
}

// notifiedAbove reports, and forgets, whether a job of higher priority than
// p was notified on queue since the last claim.
func (r *Runner) notifiedAbove(queue string, p int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	above := r.arrivals[queue] > p
	delete(r.arrivals, queue)
	return above
}
