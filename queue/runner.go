package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/run"
	"github.com/sheaf-dev/sheaf/worker"
)

// Runner claims jobs from the queues it works and runs their handlers,
// WithWorkers at a time. Create one with NewRunner; it starts nothing until
// Start. Several runners, in one process or many, may work the same queues:
// each job is claimed by one of them at a time.
type Runner struct {
	c        *Client
	cfg      config
	log      *slog.Logger
	obs      Observer
	sqlDB    *sql.DB
	timeouts timeouts

	// The runner's parts, each owning its goroutines (see package run).
	// Start starts them; supervise stops them in order.
	poller    run.Poller[retryDue]  // claims (see fetcher)
	pool      *run.Pool[*execution] // the workers
	completer run.Batcher[result]   // writes finished attempts, many per statement
	renewer   run.Renewer           // renews the leases of held claims
	rescuer   run.Periodic          // rescues expired leases, any runner's
	idle      idleWatch             // warns when the pool keeps too few idle connections
	listener  run.Reconnect         // notifications of new jobs and cancellations
	scheduler scheduler             // fires the registry's schedules
	releaser  releaser              // releases dependants as their parents complete

	more atomic.Bool // the last claim filled every free slot, so more may wait
	// suspects is set when suspects may be waiting: at start, at every
	// poll, when one is notified, and when this runner's suspect finishes.
	suspects atomic.Bool
	// pausedStale is set when a pause or resume is notified (see
	// fetcher.readPaused).
	pausedStale atomic.Bool
	// claiming is held from sending a claim until its jobs are in held, so
	// that the lease keeper, which takes it too, never mistakes a claim in
	// flight for jobs nobody runs (see store.Held.Renew).
	claiming sync.Mutex

	// Moving averages, in nanoseconds, of how long handlers run and how
	// long a claim takes: they size the claim-ahead (see capacity).
	jobNanos, claimNanos atomic.Int64

	mu      sync.Mutex
	state   int                     // runnerCreated, runnerStarted, runnerStopped
	running map[*execution]struct{} // claimed and not finished; two attempts of one job can overlap
	// held has every claim whose job may still be PROCESSING under this
	// runner's name, by claim key: from the claim until its result or its
	// requeue is written. The renewer renews exactly these.
	held     map[int64]*execution
	suspect  *execution // the suspect this runner is running, if any: one at a time
	arrivals map[string]int

	stopping, hard     chan struct{} // closed by Stop (finish what runs), and when stopping runs out of time
	stopOnce, hardOnce sync.Once
	done               chan struct{} // closed once every goroutine of the runner has returned

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

// RunnerStats counts what a runner has done since it started.
type RunnerStats struct {
	Claimed   int64 // attempts started
	Completed int64
	Retried   int64 // attempts that failed with attempts left
	Failed    int64 // jobs that failed for good
	Cancelled int64 // running jobs stopped by Cancel
	Rescued   int64 // jobs this runner rescued from expired leases (any runner's)
	Requeued  int64 // jobs put back without their attempt counting: by Stop, claimed ahead and kept waiting (see WithWorkers), or found locked under this runner's name and not running
	Rejected  int64 // results dropped because the job was no longer this runner's
	Running   int   // attempts claimed and not finished: running, or claimed ahead and waiting for a worker
	Polls     int64 // polls begun: one every WithPollInterval that the runner was not woken sooner
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
	if max := sqlDB.Stats().MaxOpenConnections; max > 0 && max < runnerConns {
		return nil, invalid("the connection pool allows %d connections; a runner needs at least %d (listener, claims, completions, leases) plus what its handlers use", max, runnerConns)
	}
	r := &Runner{
		c: c, cfg: cfg, log: cfg.logger.With("runner", cfg.runnerID), obs: cfg.observer, sqlDB: sqlDB,
		timeouts: newTimeouts(cfg.lease),
		running:  map[*execution]struct{}{},
		held:     map[int64]*execution{},
		arrivals: map[string]int{},
		stopping: make(chan struct{}),
		hard:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.pool = run.NewPool(r.execute)
	r.poller = run.Poller[retryDue]{Every: cfg.poll, Clock: cfg.clock,
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
		Opens: func(now time.Time) time.Time { return c.reg.nextOpening(now, cfg.queues) }}
	r.completer = run.Batcher[result]{Max: maxFlush, LingerBatch: completeLinger.batch, Linger: completeLinger.wait,
		Busy: func() bool { return r.runningNow() > 0 }}
	r.renewer = run.Renewer{Every: cfg.lease / 3, MaxPause: r.timeouts.renewPause, Lease: cfg.lease, Log: r.log}
	r.rescuer = run.Periodic{Every: cfg.rescueEvery, Do: r.rescue}
	r.listener = run.Reconnect{Listen: r.listen, Pause: time.Second, Log: r.log}
	r.scheduler = scheduler{c: c, cfg: cfg, log: r.log, observe: r.observe}
	r.releaser = releaser{c: c, log: r.log, hooks: cfg.hooks}
	return r, nil
}

// runnerConns is how many connections a runner keeps for itself: the
// listener's, and one each for claims, results and leases.
const runnerConns = 4

func defaultRunnerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID returns the name the runner locks jobs with.
func (r *Runner) ID() string { return r.cfg.runnerID }

// Start checks the database and starts claiming and working jobs. It
// returns an error at once, and starts nothing, when the database cannot be
// reached or its schema is missing or older than this sheaf (wrapping
// ErrNotMigrated: call Client.Migrate), so a misconfigured runner fails at
// start rather than logging errors every second; Start may then be called
// again. It returns ErrStarted if called after a successful Start or after
// Stop. Once started, the runner warns (once, at Warn) if its connection
// pool cannot serve its workers, and says what to set.
//
// ctx carries values to every job's context. Cancelling it stops the runner
// as Stop does when its context ends: claims stop, running jobs are
// cancelled (cause ErrStopping) and go back to the queue as their handlers
// return, and Done is closed once they have. Call Stop to wait for that.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerCreated {
		return ErrStarted
	}
	if err := r.preflight(ctx); err != nil {
		return err
	}
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
	f := &fetcher{r: r, conn: r.c.st.Hold(true), jobsCtx: jobsCtx, cursors: map[string]*cursor{}}
	results, leases := r.c.st.Hold(false), r.c.st.Hold(false)
	r.poller.Fetch = f.fetch
	r.completer.Flush = func(batch []result) { r.flush(results, batch) }
	r.renewer.Renew = func(ctx context.Context) error { return r.renew(ctx, leases) }
	r.seen(ctx, leases, true)

	r.completer.Start(4 * r.cfg.workers) // a few claims' worth; see run.Batcher
	r.pool.Start(r.cfg.workers)
	r.poller.Start(values)
	r.listener.Start(values)
	r.scheduler.Start(values)
	r.renewer.Start(values)
	r.rescuer.Start(values)
	r.idle.Start(values)
	go r.supervise(ctx, cancelJobs, func() { r.forget(leases); f.conn.Close(); results.Close(); leases.Close() })
	r.log.Info("queue: runner started", "workers", r.cfg.workers, "queues", r.cfg.queues)
	return nil
}

// supervise stops the runner's parts, in order, once Stop is called or
// Start's context ends, and closes done when every goroutine has returned:
// first those that claim, then (once the workers have run what was claimed,
// or, stopping hard, once the jobs still running have been put back) the
// lease keepers and the completer; then it closes their connections.
func (r *Runner) supervise(startCtx context.Context, cancelJobs context.CancelFunc, closeConns func()) {
	defer close(r.done)
	defer cancelJobs()
	select {
	case <-r.stopping:
	case <-r.hard:
	case <-startCtx.Done():
		r.stopHard()
	}
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
		// Jobs that never started go back now; the others each as its
		// handler returns (see finish), their leases renewed till then.
		r.requeue(r.releaseRunning(), "the runner stopped before they finished")
		<-jobsDone
	}
	r.renewer.Stop()
	r.rescuer.Stop()
	r.idle.Stop()
	r.completer.Stop()
	closeConns()
	r.log.Info("queue: runner stopped")
}

func (r *Runner) stopHard() { r.hardOnce.Do(func() { close(r.hard) }) }

// Stop stops the runner: it claims nothing more and waits for running jobs
// to finish and their results to be written, then returns nil. If ctx ends
// first, Stop cancels the jobs still running (cause ErrStopping) and returns
// at once an error wrapping ctx.Err(); each of those jobs goes back to the
// queue, without its attempt counting, once its handler has returned
// (whatever it returns is ignored), so that no other runner starts a job
// while this one is still winding it down. Done is closed when the last has.
// Once Done is closed no job is left PROCESSING by this runner, unless the
// database could not be reached (then the jobs are rescued when their leases
// expire). Stop is idempotent and safe without Start.
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
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		r.stopHard()
		return fmt.Errorf("queue: stop: %w (the jobs still running were cancelled and go back to the queue as their handlers return; Done is closed when they have)", ctx.Err())
	}
}

// Done returns a channel that is closed when the runner has stopped and
// every goroutine it started has returned: after Stop, or after Start's
// context ended. For a runner that was never started it is closed by Stop.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats {
	n := r.runningNow()
	return RunnerStats{
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

// releaseRunning, for a runner stopping out of time, marks the attempts
// still running as released and cancels them: finish then puts each back in
// the queue once its handler has returned, instead of writing its result. It
// takes the attempts still waiting for a worker out of the workers' reach
// and returns them, to be put back at once.
func (r *Runner) releaseRunning() []*execution {
	waiting := r.unwait(func(*execution) bool { return true })
	var running []*execution
	r.mu.Lock()
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

// requeue puts released attempts' jobs back in the queue without counting
// the attempt. None of the released ones can still write, because their
// handlers have returned or never started. A job that is no longer the
// attempt's (cancelled, or rescued) stays as it is; a cancelled one is
// reported as such.
func (r *Runner) requeue(exs []*execution, why string) {
	if len(exs) == 0 {
		return
	}
	defer r.unhold(exs...)
	ids, keys, counted := make([]int64, len(exs)), make([]int64, len(exs)), make([]bool, len(exs))
	for i, ex := range exs {
		ids[i], keys[i], counted[i] = ex.row.ID, keyOf(ex), ex.counted
	}
	back := map[int64]bool{}
	err := r.retry(func(ctx context.Context, _ int) error {
		put, err := r.c.st.Requeue(ctx, ids, keys, counted)
		mark(back, put)
		return err
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

// observe reports e to the hooks, then to the observer: an observer that
// sees an event finds the hooks' instruments already updated.
func (r *Runner) observe(e Event) {
	for _, h := range r.cfg.hooks {
		if h.Observe != nil {
			r.observeSafely(h.Observe, e)
		}
	}
	if r.obs != nil {
		r.observeSafely(r.obs.Observe, e)
	}
}

func (r *Runner) observeSafely(observe func(Event), e Event) {
	if err := worker.Safely(func() error { observe(e); return nil }); err != nil {
		r.log.Error("queue: observer panicked", "err", err)
	}
}

// userCall calls fn, the user's code, on a goroutine of its own and returns
// its error: a panic as a *worker.PanicError, and a call to runtime.Goexit
// (which would end the runner goroutine that called fn, and nothing could
// stop it) as one wrapping worker.ErrGoexit. For callbacks on the runner's
// own goroutines that are not on a hot path: schedule ticks and rule
// children.
func userCall(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		if worker.Try(fn, func(err error) { done <- err }) {
			done <- nil
		}
	}()
	return <-done
}
