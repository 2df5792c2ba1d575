package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/run"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Runner claims jobs from the queues it works and runs their handlers,
// Config.Workers at a time. New starts nothing until Start.
type Runner struct {
	cfg      Config
	st       store.Store
	log      *slog.Logger
	timeouts timeouts
	kinds    sync.Map // kind name to the *Kind Config.Kinds looked up

	// The runner's parts, each owning its goroutines (see package run).
	// Start starts them; supervise stops them in order.
	poller    run.Poller[retryDue]  // claims (see fetcher)
	pool      *run.Pool[*Execution] // the workers
	completer run.Batcher[result]   // writes finished attempts, many per statement
	renewer   run.Renewer           // renews the leases of held claims
	leader    *maintain.Leader      // campaigns, and rescues expired leases while it leads; nil without Config.Campaign
	idle      idleWatch             // warns when the pool keeps too few idle connections
	listener  run.Reconnect         // notifications of new jobs and cancellations
	scheduler Part                  // fires the registry's schedules
	// checkpoints moves SQLite's write-ahead log into the database file
	// (see store.Checkpointer); nil on other stores.
	checkpoints *run.Periodic

	more atomic.Bool // the last claim filled every free slot, so more may wait
	// suspects is set when suspects may be waiting: at start, at every
	// poll, when one is notified, and when this runner's suspect finishes.
	suspects atomic.Bool
	// pausedStale is set when a pause or resume is notified (see
	// fetcher.readPaused).
	pausedStale atomic.Bool
	// limited is set while a limit is in force (see fetcher.noteLimits),
	// so a completion that frees a limit's slot wakes the claims.
	limited atomic.Bool
	// tight is set while a concurrency limit in force allows no more than
	// this runner's workers (see fetcher.noteLimits): it likely binds, and
	// its slots are claimed as soon as completions free them, not batched
	// up as the claims of free workers are.
	tight atomic.Bool
	// slotFreed is set when completions freed a limit's slots and woke
	// the claims, until a fetch finds a worker free: a worker counts as
	// free only after it sent its result, and a fetch woken before that
	// claims nothing; the worker wakes it again. Under a tight limit the
	// fetch that takes it claims without the cooldown.
	slotFreed atomic.Bool
	// claiming is held from sending a claim until its jobs are in held, so
	// that the lease keeper, which takes it too, never mistakes a claim in
	// flight for jobs nobody runs (see store.Held.Renew).
	claiming sync.Mutex

	// Moving averages, in nanoseconds, of how long handlers run, how long
	// a claim takes, and how long a round trip to the server takes (the
	// read of the paused queues, a poll interval apart): they size the
	// claim-ahead (see ahead).
	jobNanos, claimNanos, rttNanos atomic.Int64

	mu      sync.Mutex
	state   int                     // runnerCreated, runnerStarted, runnerStopped
	running map[*Execution]struct{} // claimed and not finished; two attempts of one job can overlap
	// held has every claim whose job may still be PROCESSING under this
	// runner's name, by claim key: from the claim until its result or its
	// requeue is written. The renewer renews exactly these.
	held     map[int64]*Execution
	suspect  *Execution // the suspect this runner is running, if any: one at a time
	arrivals map[string]int

	stopping, hard     chan struct{} // closed by Stop (finish what runs), and when stopping runs out of time
	stopOnce, hardOnce sync.Once
	done               chan struct{} // closed once every goroutine of the runner has returned

	// A stop out of time cuts the running jobs short (see cutShort). cutBy
	// is the deadline it must be done by, in Unix nanoseconds (0: none,
	// bound it by a statement's timeout); Stop sets it before closing hard.
	// cut is closed once the cut is done, or the runner has stopped
	// without one, and cutResult is written before.
	cutBy     atomic.Int64
	cut       chan struct{}
	cutOnce   sync.Once
	cutResult cutResult
	// unwritten counts results whose statements failed (see flush), for a
	// cut to tell whether those it waited for were written.
	unwritten atomic.Int64

	stats runnerCounters
}

const (
	runnerCreated = iota
	runnerStarted
	runnerStopped
)

type runnerCounters struct {
	claimed, completed, retried, failed, cancelled, rescued, requeued, rejected, polls atomic.Int64
}

// Stats counts what a runner has done since it started; see
// queue.RunnerStats, which converts from it.
type Stats struct {
	Claimed   int64
	Completed int64
	Retried   int64
	Failed    int64
	Cancelled int64
	Rescued   int64
	Requeued  int64
	Rejected  int64
	Running   int
	Polls     int64
}

// New returns a runner configured by cfg, which it keeps; see Config for
// what must be set.
func New(cfg Config) *Runner {
	r := &Runner{
		cfg: cfg, st: cfg.Store, log: cfg.Log, scheduler: cfg.Scheduler,
		timeouts: newTimeouts(cfg.Lease),
		running:  map[*Execution]struct{}{},
		held:     map[int64]*Execution{},
		arrivals: map[string]int{},
		stopping: make(chan struct{}),
		hard:     make(chan struct{}),
		done:     make(chan struct{}),
		cut:      make(chan struct{}),
	}
	if r.scheduler == nil {
		r.scheduler = noPart{}
	}
	r.pool = run.NewPool(r.execute)
	r.poller = run.Poller[retryDue]{Every: cfg.Poll, Clock: cfg.Clock,
		Polled: func() {
			r.stats.polls.Add(1)
			r.suspects.Store(true) // rescued by another process, perhaps unnotified
		},
		Due: func(d retryDue) {
			// The retry is due: claim now, and look above the cursor for it.
			r.noteArrival(d.queue, d.priority)
			r.wakeFetch()
		},
		// A closed batch window wakes the claims when it opens.
		Opens: func(now time.Time) time.Time { return cfg.Kinds.NextOpening(now, cfg.Queues) }}
	r.completer = run.Batcher[result]{Max: maxFlush, LingerBatch: completeLinger.batch, Linger: completeLinger.wait,
		Busy: func() bool { return r.runningNow() > 0 }, Flushes: r.flushes}
	r.renewer = run.Renewer{Every: cfg.Lease / 3, MaxPause: r.timeouts.renewPause, Lease: cfg.Lease, Log: r.log}
	if cfg.Campaign {
		r.leader = maintain.New(maintain.Config{ID: cfg.ID, TTL: min(cfg.Lease, MaxLeadership), Elector: cfg.Store,
			Tasks: append([]maintain.Task{rescuer{r}}, cfg.Upkeep...), Log: r.log})
	}
	r.listener = run.Reconnect{Listen: r.listen, Pause: time.Second, Log: r.log}
	if cp, ok := cfg.Store.(store.Checkpointer); ok {
		r.checkpoints = &run.Periodic{Every: CheckpointEvery, Do: func(ctx context.Context) {
			// A checkpoint that fails leaves the log to SQLite's own, in
			// a commit: slower, nothing lost; the next one tries again.
			if err := cp.Checkpoint(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("queue: checkpoint", "error", err)
			}
		}}
	}
	return r
}

// CheckpointEvery is how often a runner on SQLite checkpoints the
// write-ahead log, if its process wrote since: jobs picked up one at a
// time write some 200 pages of log in that time, a fifth of what makes a
// commit checkpoint. Every 50 ms, the pickups' p99 was 1.6 to 2.5 ms;
// every 20 ms, 1.4 to 1.8 (2.4 to 3.4 with SQLite's checkpoints alone).
const CheckpointEvery = 20 * time.Millisecond

// MaxLeadership bounds the lease of the maintenance's leadership, which is
// otherwise the runner's lease (Config.Lease): a runner that dies while it
// leads is replaced within about that long, however long its jobs' leases.
const MaxLeadership = 30 * time.Second

// Conns is how many connections a runner keeps for itself: the listener's,
// and one each for claims, results and leases. Behind a far server it also
// borrows up to farFlushes-1 from the pool, each for one statement of
// results at a time.
const Conns = 4

// Start runs Config.Preflight and, if it passes, starts claiming and
// working jobs. It returns Errors.Started if called after a successful
// Start or after Stop. See queue.Runner.Start.
//
// ctx carries values to every job's context. Cancelling it stops the runner
// as Stop does when its context ends: claims stop, and the jobs still
// running are cancelled (cause Errors.Stopping) and put back in the queue at
// once; Done is closed once their handlers have returned. Call Stop to wait
// for the put-back.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerCreated {
		return r.cfg.Errors.Started
	}
	room, err := r.cfg.Preflight(ctx)
	if err != nil {
		return err
	}
	sqlDB, err := r.cfg.DB.DB()
	if err != nil {
		return err
	}
	advice, need := PoolAdvice(sqlDB.Stats().MaxOpenConnections, r.cfg.Workers, room)
	if advice != "" {
		r.log.Warn(PoolWarning, "advice", advice)
	}
	r.idle.arm(sqlDB, r.log, need)
	r.state = runnerStarted
	r.suspects.Store(true) // rescued jobs may be waiting from before this runner started
	// Jobs are cancelled by the runner, each with its cause, never by ctx
	// directly: a job cancelled by ctx would fail an attempt, where a
	// stopping runner puts it back.
	values := context.WithoutCancel(ctx)
	jobsCtx, cancelJobs := context.WithCancel(values)

	// Each part gets a connection of its own, held for its lifetime.
	// Claims commit without waiting for the WAL to reach disk. A claim lost
	// in a server crash puts its job back in the queue with its attempt
	// uncounted; the running attempt's result is then refused by the guard
	// and the job runs again: still at least once, and the claim is cheaper
	// and quicker. Results are written durably.
	f := &fetcher{r: r, conn: r.st.Hold(true), jobsCtx: jobsCtx, cursors: map[string]*cursor{}}
	results, leases := &resultConns{hold: func() store.Conn { return r.st.Hold(false) }}, r.st.Hold(false)
	r.poller.Fetch = f.fetch
	r.completer.Flush = func(batch []result) {
		conn := results.get()
		defer results.put(conn)
		r.flush(conn, batch)
	}
	r.renewer.Renew = func(ctx context.Context) error { return r.renew(ctx, leases) }
	r.seen(ctx, leases, true)

	// A few claims' worth, and a statement's: results queue up while the
	// last statement travels, and a worker whose result finds no room waits.
	r.completer.Start(max(4*r.cfg.Workers, maxFlush)) // see run.Batcher
	r.pool.Start(r.cfg.Workers)
	r.poller.Start(values)
	r.listener.Start(values)
	r.scheduler.Start(values)
	r.renewer.Start(values)
	if r.leader != nil {
		r.leader.Start(values)
	}
	r.idle.Start(values)
	if r.checkpoints != nil {
		r.checkpoints.Start(values)
	}
	go r.supervise(ctx, cancelJobs, func() { r.forget(leases); f.conn.Close(); results.Close(); leases.Close() })
	r.log.Info("queue: runner started", "workers", r.cfg.Workers, "queues", r.cfg.Queues)
	return nil
}

// supervise stops the runner's parts, in order, once Stop is called or
// Start's context ends, and closes done when every goroutine has returned:
// first the leader (at once, so that another runner takes over the
// maintenance), and those that claim, then (once the workers have run what was claimed,
// or, stopping hard, at once, while the handlers still run) the jobs still
// running and waiting are put back (see cutShort); once the workers have
// returned, the lease keepers and the completer stop; then it closes their
// connections.
func (r *Runner) supervise(startCtx context.Context, cancelJobs context.CancelFunc, closeConns func()) {
	defer close(r.done)
	defer r.endCut(cutResult{}) // a Stop waiting for a cut that never came
	defer cancelJobs()
	select {
	case <-r.stopping:
	case <-r.hard:
	case <-startCtx.Done():
		r.stopHard()
	}
	// The leader stops its tasks and hands the leadership over while the
	// jobs finish; its goroutines are joined before done is closed.
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		if r.leader != nil {
			_ = r.leader.Stop(context.Background())
		}
	}()
	r.poller.Stop() // no more claims; every claimed job has been launched
	r.listener.Stop()
	r.scheduler.Stop()

	jobsDone := make(chan struct{})
	go func() { r.pool.Stop(); close(jobsDone) }() // the workers run what was launched, then exit
	select {
	case <-jobsDone:
	case <-r.hard:
	case <-startCtx.Done():
		r.stopHard()
	}
	select {
	case <-jobsDone:
	default:
		r.cutShort()
		// Handlers that ignore their cancellation still run: the workers,
		// the lease keepers and the completer wait for them.
		<-jobsDone
	}
	r.renewer.Stop()
	r.idle.Stop()
	r.completer.Stop()
	if r.checkpoints != nil {
		r.checkpoints.Stop()
	}
	<-leaderDone
	closeConns()
	r.log.Info("queue: runner stopped")
}

func (r *Runner) stopHard() { r.hardOnce.Do(func() { close(r.hard) }) }

// cutMargin is how long before Stop's deadline, left away, a stop out of
// time begins to put back the jobs still running: a fifth of the time left
// when Stop was called, but at least minCutMargin (all of it, if less),
// and no more than one bookkeeping statement's timeout. The put-back is
// one statement, and the results already finished are written meanwhile:
// milliseconds on a healthy database; the margin leaves room for a loaded
// one, and most of Stop's time to the jobs. A 5 s deadline puts back at
// 4 s; a minute's, 5 s before its end with the default lease.
func cutMargin(left, statement time.Duration) time.Duration {
	return max(0, min(left, max(left/5, minCutMargin), statement))
}

// minCutMargin is the least time a stop out of time leaves itself to put
// back the jobs: a round trip or two to a database across a network.
const minCutMargin = 100 * time.Millisecond

// cutResult is what a cut (see cutShort) did.
type cutResult struct {
	cut  bool  // it ran
	jobs int   // attempts it cancelled
	back int   // jobs it put back: fewer, if some had finished meanwhile
	err  error // what it could not do, and what becomes of that
}

// endCut records res, unless a cut was recorded before, and lets Stop
// return.
func (r *Runner) endCut(res cutResult) {
	r.cutOnce.Do(func() {
		r.cutResult = res
		close(r.cut)
	})
}

// cutShort, for a runner stopping out of time, cancels every job still
// running or waiting for a worker (cause ErrStopping) and puts them back in
// the queue at once, their attempts uncounted, without waiting for their
// handlers; and it waits for the results already finished to be written.
// Both are bounded by Stop's deadline (see cutBy), or, without one, by a
// bookkeeping statement's timeout. A handler still running afterwards has
// lost its job: the job is QUEUED, and claimed again under a new claim
// number, so the store's guards (status PROCESSING and this claim) refuse
// its result, SetProgress and SetOutput.
func (r *Runner) cutShort() {
	by := time.Now().Add(r.timeouts.statement)
	if ns := r.cutBy.Load(); ns != 0 && time.Unix(0, ns).After(time.Now()) {
		by = time.Unix(0, ns)
	}
	unwritten := r.unwritten.Load()
	exs := r.cutRunning()
	var errs []error
	back, err := r.requeue(exs, by, "the runner stopped out of time before they finished")
	if err != nil {
		errs = append(errs, fmt.Errorf("could not put them back in the queue (%w); they will be rescued when their leases expire", err))
	}
	if !r.completer.WaitFlushed(time.Until(by)) || r.unwritten.Load() != unwritten {
		errs = append(errs, errors.New("could not write the results of jobs that finished; they will be rescued when their leases expire"))
	}
	r.endCut(cutResult{cut: true, jobs: len(exs), back: back, err: errors.Join(errs...)})
}

// Stop stops the runner, cutting short what still runs a margin before
// ctx's deadline (see cutMargin and cutShort): when it returns, nothing is
// left PROCESSING under the runner. See queue.Runner.Stop for the contract.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	was := r.state
	r.state = runnerStopped
	r.mu.Unlock()
	if was == runnerCreated {
		r.stopOnce.Do(func() { close(r.done) })
		return nil
	}
	r.stopOnce.Do(func() { close(r.stopping) })
	var cutSoon <-chan time.Time
	var margin time.Duration
	deadline, ok := ctx.Deadline()
	if ok {
		left := time.Until(deadline)
		margin = cutMargin(left, r.timeouts.statement)
		t := time.NewTimer(left - margin)
		defer t.Stop()
		cutSoon = t.C
	}
	select {
	case <-r.done:
		return r.cutResult.earlierError()
	case <-r.cut: // cut short already, as Start's context or another Stop's ended, which was told
		return r.cutResult.earlierError()
	case <-ctx.Done():
	case <-cutSoon:
	}
	var late <-chan time.Time
	if left := time.Until(deadline); ok && left > 0 {
		// The cut ends a quarter of the margin before the deadline, so that
		// what it could not do is reported here: a statement it gives up on
		// (a row held by another transaction) takes that long to return on
		// a loaded machine. It may have to wait first for a claim under way
		// (see supervise), which is bounded by a statement's timeout, not
		// by the deadline: hence late.
		r.cutBy.Store(deadline.Add(-margin / 4).UnixNano())
		t := time.NewTimer(left)
		defer t.Stop()
		late = t.C
	}
	r.stopHard()
	select {
	case <-r.cut:
	case <-late:
		return fmt.Errorf("queue: stop: %w: the runner could not put its running jobs back in the queue in time; "+
			"they go back when it can, or are rescued when their leases expire", context.DeadlineExceeded)
	}
	return r.cutResult.stopError(ctx)
}

// stopError is what Stop(ctx) returns after the cut res: nil if it cut
// nothing short, else an error wrapping why it did and saying what became
// of the jobs.
func (res cutResult) stopError(ctx context.Context) error {
	if !res.cut || res.jobs == 0 && res.err == nil {
		return nil // everything finished: there was nothing to cut short
	}
	why := ctx.Err()
	if why == nil {
		why = context.DeadlineExceeded // cut short ahead of the deadline
	}
	if res.err != nil {
		return fmt.Errorf("queue: stop: %w: cancelled %d unfinished jobs (%d put back in the queue): %w", why, res.jobs, res.back, res.err)
	}
	if res.back < res.jobs {
		return fmt.Errorf("queue: stop: %w: cancelled %d unfinished jobs and put %d back in the queue; the others had completed or been cancelled meanwhile",
			why, res.jobs, res.back)
	}
	return fmt.Errorf("queue: stop: %w: cancelled %d unfinished jobs and put them back in the queue", why, res.jobs)
}

// earlierError is what a Stop that finds the runner already cut short (by
// Start's context, or another Stop) returns: nil if that cut put back
// every job it cut, else what it could not do. That cut's own Stop, if
// any, returned its stopError.
func (res cutResult) earlierError() error {
	if res.err == nil {
		return nil
	}
	return fmt.Errorf("queue: stop: the runner was cut short before this Stop (its Start's context ended, or another Stop ran out of time), "+
		"and cancelled %d unfinished jobs (%d put back in the queue): %w", res.jobs, res.back, res.err)
}

// Done returns a channel that is closed when the runner has stopped and
// every goroutine it started has returned, handlers that ignore their
// cancellation included: after Stop, or after Start's context ended. It
// may close well after Stop returns (see Stop). For a runner that was never
// started it is closed by Stop.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	n := r.runningNow()
	return Stats{
		Claimed: r.stats.claimed.Load(), Completed: r.stats.completed.Load(), Retried: r.stats.retried.Load(),
		Failed: r.stats.failed.Load(), Cancelled: r.stats.cancelled.Load(), Rescued: r.stats.rescued.Load(),
		Requeued: r.stats.requeued.Load(), Rejected: r.stats.rejected.Load(), Running: n, Polls: r.stats.polls.Load(),
	}
}

// runningNow is how many attempts are claimed and not finished.
func (r *Runner) runningNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// cutRunning, for a runner stopping out of time, marks every attempt whose
// handler has not returned as cut (finish then writes nothing for it) and
// takes the attempts still waiting for a worker out of the workers' reach;
// it cancels them all and returns them, to be put back at once.
//
// It rolls back the transactions the cut handlers called Job.CompleteTx
// in: such a transaction holds its job's row (on SQLite, the database's
// write lock) until it ends, and a handler that began it without the job's
// context may not end it for a long while, keeping the put-back waiting.
// A transaction that is committing is not rolled back (sql.Tx settles
// which comes first): its job is then COMPLETED, and the put-back leaves
// it so.
func (r *Runner) cutRunning() []*Execution {
	exs := r.unwait(func(*Execution) bool { return true })
	var txs []gorm.TxCommitter
	r.mu.Lock()
	for _, ex := range exs {
		ex.cut = true
	}
	for ex := range r.running {
		if !ex.finished {
			ex.released, ex.cut = true, true
			exs = append(exs, ex)
			txs = append(txs, ex.txs...)
		}
	}
	r.mu.Unlock()
	for _, ex := range exs {
		ex.cancel(r.cfg.Errors.Stopping)
	}
	for _, tx := range txs {
		_ = tx.Rollback() // sql.ErrTxDone if it ended already
	}
	return exs
}

// requeue puts released attempts' jobs back in the queue without counting
// the attempt, trying until by (if not zero). A released attempt's handler
// has returned, never started, or (cut short) may still run: its result,
// if any, is dropped by finish and would be refused by the store's guards,
// since the job is no longer PROCESSING under its claim. A job that is no
// longer the attempt's (cancelled, or rescued) stays as it is; a cancelled
// one is reported as such. It returns how many jobs it put back, and the
// database's error, if it could not be reached.
func (r *Runner) requeue(exs []*Execution, by time.Time, why string) (int, error) {
	if len(exs) == 0 {
		return 0, nil
	}
	defer r.unhold(exs...)
	ids, keys, counted := make([]int64, len(exs)), make([]int64, len(exs)), make([]bool, len(exs))
	events := make([]Event, len(exs)) // requeued, or cancelled: only the type differs
	// Under the lock: a suspect cut short may be recording its start.
	r.mu.Lock()
	for i, ex := range exs {
		ids[i], keys[i], counted[i] = ex.row.ID, keyOf(ex), ex.counted
		events[i] = ex.event(EventRequeued)
	}
	r.mu.Unlock()
	back := map[int64]bool{}
	err := r.retryBy(by, func(ctx context.Context, _ int) error {
		put, err := r.st.Requeue(ctx, ids, keys, counted)
		mark(back, put)
		return err
	})
	if err != nil {
		r.log.Error("queue: could not put jobs back in the queue; they will be rescued when their leases expire", "why", why,
			"jobs", len(ids)-len(back), "put_back", len(back), "err", err)
	}
	for i, ex := range exs {
		switch {
		case back[ex.row.ID]:
			r.stats.requeued.Add(1)
			r.observe(events[i])
		case errors.Is(context.Cause(ex.ctx), r.cfg.Errors.Cancelled):
			r.stats.cancelled.Add(1)
			events[i].Type = EventCancelled
			r.observe(events[i])
		}
	}
	if len(back) > 0 {
		r.log.Warn("queue: jobs put back in the queue", "why", why, "jobs", len(back))
	}
	return len(back), err
}

// debug logs at Debug level about a job, building the job's logger only if
// the line will be written: most jobs are never logged.
func (r *Runner) debug(ex *Execution, msg string, args ...any) {
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.jobLogger(&ex.row).Debug(msg, args...)
	}
}

func (r *Runner) jobLogger(row *Row) *slog.Logger {
	l := r.log.With("job_id", row.ID, "kind", row.Kind, "attempt", row.Attempts)
	if row.CorrelationID != nil {
		l = l.With("correlation_id", *row.CorrelationID)
	}
	return l
}

func (r *Runner) observe(e Event) { r.cfg.Observe(e) }
