package queue

import (
	"cmp"
	"context"

	"github.com/sheaf-dev/sheaf/queue/internal/backoff"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/option"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// Runner claims jobs from the queues it works and runs their handlers,
// WithWorkers at a time. Create one with NewRunner; it starts nothing until
// Start. Several runners, in one process or many, may work the same queues:
// each job is claimed by one of them at a time.
type Runner struct {
	r  *runner.Runner
	id string
}

// RunnerStats counts what a runner has done since it started.
type RunnerStats struct {
	Claimed   int64 // attempts started
	Completed int64
	Retried   int64 // attempts that failed with attempts left
	Failed    int64 // jobs that failed for good
	Cancelled int64 // running jobs stopped by Cancel
	Rescued   int64 // jobs this runner rescued from expired leases (any runner's), while it led the maintenance
	Requeued  int64 // jobs put back without their attempt counting: by Stop, claimed ahead and kept waiting (see WithWorkers), or found locked under this runner's name and not running
	Rejected  int64 // results dropped because the job was no longer this runner's
	Running   int   // attempts claimed and not finished: running, or claimed ahead and waiting for a worker
	Polls     int64 // polls begun: one every WithPollInterval that the runner was not woken sooner
}

// NewRunner returns a runner that works jobs of c's registry. Options:
// WithWorkers, WithQueues, WithPollInterval, WithLease, WithRescueInterval,
// WithRunnerID, WithClock, WithMaintenance, WithoutMaintenance, WithLogger
// and WithObserver (the last three default to the client's).
func NewRunner(c *Client, opts ...RunnerOption) (*Runner, error) {
	if c == nil {
		return nil, check.Invalid("nil *Client")
	}
	cfg := c.cfg
	cfg.Runner = option.Runner{Workers: DefaultWorkers, Queues: []string{DefaultQueue}, Poll: DefaultPollInterval, Lease: DefaultLease}
	if err := check.Each("RunnerOption", opts, func(o RunnerOption) error { return o.applyRunner(&cfg) }); err != nil {
		return nil, err
	}
	cfg.RescueEvery = cmp.Or(cfg.RescueEvery, cfg.Lease/2)
	cfg.ID = cmp.Or(cfg.ID, runner.DefaultID())
	if err := runner.CheckPool(c.db); err != nil {
		return nil, err
	}
	campaign, upkeep, err := cfg.Campaign(func() []maintain.Task { return c.upkeepAt(nil) })
	if err != nil {
		return nil, err
	}
	log := cfg.logger.With("runner", cfg.ID)
	observe := observers(cfg.hooks, cfg.observer, log)
	rc := runner.Config{
		ID: cfg.ID, Workers: cfg.Workers, Queues: cfg.Queues,
		Poll: cfg.Poll, Lease: cfg.Lease, RescueEvery: cfg.RescueEvery, Clock: cfg.clock,
		Log: log, Store: c.st, DB: c.db,
		Kinds:   runnerKinds{c: c, hooks: cfg.hooks},
		Rules:   c.releaser(log, cfg.hooks),
		Observe: func(e runner.Event) { observe(eventOf(e)) },
		Preflight: func(ctx context.Context) (int, error) {
			room, err := runner.Preflight(ctx, c.st, ErrNotMigrated, ErrSchemaTooNew)
			if err == nil {
				err = c.declareLimits(ctx)
			}
			return room, err
		},
		Scheduler: c.scheduler(cfg, log, observe),
		Campaign:  campaign, Upkeep: upkeep,
		DefaultBackoff: DefaultBackoff(),
		DecodeBackoff:  func(b []byte) (runner.Backoff, error) { return backoff.Decode(b) },
		Errors: runner.Errors{Started: ErrStarted, Stopping: ErrStopping, Cancelled: ErrCancelled,
			LeaseLost: ErrLeaseLost, Timeout: ErrTimeout, Invalid: ErrInvalidOption, Permanent: IsPermanent},
	}
	if len(cfg.hooks) > 0 {
		rc.Attempt = func(ctx context.Context, ex *runner.Execution) (context.Context, func(runner.Event)) {
			return attemptHooks(ctx, cfg.hooks, ex)
		}
	}
	return &Runner{r: runner.New(rc), id: cfg.ID}, nil
}

// ID returns the name the runner locks jobs with.
func (r *Runner) ID() string { return r.id }

// Start checks the database and starts claiming and working jobs. When the
// database cannot be reached, or its schema is missing or older than this
// sheaf (an error wrapping ErrNotMigrated: call Client.Migrate), it returns
// the error at once and starts nothing, and may be called again. It returns
// ErrStarted after a successful Start or after Stop. Once started, the
// runner warns (once, at Warn) if its connection pool cannot serve its
// workers, and says what to set.
//
// ctx carries values to every job's context. Cancelling it stops the runner
// as Stop does when its context ends: the running jobs are cancelled (cause
// ErrStopping) and put back in the queue at once. So give Start a context
// that lives as long as the runner, and stop it with Stop.
func (r *Runner) Start(ctx context.Context) error { return r.r.Start(ctx) }

// Stop stops the runner: it claims nothing more, waits for running jobs to
// finish and their results to be written, and returns nil.
//
// If ctx ends first, or is about to, Stop cuts the jobs short: it cancels
// those still running or claimed ahead (cause ErrStopping), puts them back
// in the queue without their attempts counting, writes the results of
// those that finished, and returns an error wrapping ctx.Err()
// (context.DeadlineExceeded if the deadline is still to come). When Stop
// returns, no job is left PROCESSING under this runner, so a program may
// exit then. It does not wait for handlers that ignore their cancellation:
// their jobs go back all the same, what they do afterwards through their
// Job is refused, and Done is closed when they have returned.
//
// With a deadline, Stop cuts short a margin before it, for the put-back: a
// fifth of the time left, at least 100 ms (or all of it), at most WithLease
// / 6 (between 1 s and 10 s); a 5 s deadline lets jobs run 4 s. If Start's
// context ended, or another Stop's, and the jobs were cut short, Stop
// returns nil once they are back, or an error saying what that could not
// do.
//
// The put-back rolls back the transactions in which the handlers it cuts
// short called Job.CompleteTx (one that is committing completes its job
// instead). It puts back at once the jobs whose rows no other transaction
// holds, and waits for the others until a quarter of the margin before the
// deadline, which leaves it time to return by then. On SQLite any
// transaction that has written holds the whole database, so begin a
// handler's transactions with the job's context (db.WithContext(ctx)),
// which ends them when the job is cancelled.
//
// If the database cannot be reached, the jobs Stop could not put back (or
// whose results it could not write) stay PROCESSING until their leases
// expire and another runner rescues them; Stop's error says so. Stop is
// idempotent and safe without Start.
func (r *Runner) Stop(ctx context.Context) error { return r.r.Stop(ctx) }

// Done returns a channel that is closed when the runner has stopped and
// every goroutine it started has returned: after Stop, or after Start's
// context ended. For a runner that was never started it is closed by Stop.
func (r *Runner) Done() <-chan struct{} { return r.r.Done() }

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats { return RunnerStats(r.r.Stats()) }
