package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// PauseQueue pauses the queue name: runners, in every process, stop
// claiming its jobs (suspects included) within a poll interval (at once on
// PostgreSQL), and the jobs already running finish. Enqueued jobs wait,
// QUEUED, until ResumeQueue. Pausing a paused queue, or one without jobs,
// is fine; a bad name returns an error wrapping ErrInvalidOption. On a
// TxClient the pause takes effect when the transaction commits.
func (c *ops) PauseQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "PauseQueue", name, true)
}

// ResumeQueue resumes a queue that PauseQueue paused: runners claim its
// jobs again within a poll interval (at once on PostgreSQL). Resuming a
// queue that is not paused changes nothing.
func (c *ops) ResumeQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "ResumeQueue", name, false)
}

func (c *ops) setPaused(ctx context.Context, op, name string, paused bool) error {
	if err := check.QueueName(op, name); err != nil {
		return err
	}
	return check.Failed(ctx, fmt.Sprintf("%s %q", op, name), c.st.SetPaused(ctx, c.db, name, paused))
}

// QueueInfo describes a queue.
type QueueInfo struct {
	Name string
	// Counts counts the queue's jobs by status, finished ones as Stats
	// does; a status without jobs has no entry.
	Counts map[Status]int64
	// OldestDue is how long the longest-waiting due QUEUED job has waited;
	// zero if none is due.
	OldestDue time.Duration
	// Paused is true when the queue is paused (PauseQueue), since PausedAt.
	Paused   bool
	PausedAt *time.Time
}

// Queues describes every queue that has jobs or is paused, by name. It
// counts as Stats does: finished jobs over the history the day roll-ups
// keep, pruned or not, at a cost that follows the jobs that wait or run
// and the hour under way once a day is final.
func (c *ops) Queues(ctx context.Context) ([]QueueInfo, error) {
	qs, err := operate.Queues[Status](ctx, c.st, c.db)
	return converted(qs, func(q operate.QueueInfo[Status]) QueueInfo { return QueueInfo(q) }), err
}

// The outcomes of attempts (Attempt.Outcome).
const (
	OutcomeCompleted = "completed"
	OutcomeRetried   = "retried"   // failed, and the job was to run again
	OutcomeFailed    = "failed"    // failed, and so did the job
	OutcomeCancelled = "cancelled" // the job was cancelled while it ran
	OutcomeRescued   = "rescued"   // its lease expired: the runner died, froze or lost the database
	OutcomeRunning   = "running"
)

// Attempt is one attempt of a job: one claim of it by a runner.
type Attempt struct {
	// Number is the claim's number: 1 for the first claim of the job.
	// Claims that were put back without running to an end (by Stop, or
	// claimed ahead and given back) leave gaps.
	Number int
	// Runner is the runner that ran it (see WithRunnerID).
	Runner string
	// StartedAt is when it started; zero for a rescued job's attempt
	// claimed and not started yet.
	StartedAt time.Time
	// FinishedAt is when it ended; nil while it runs.
	FinishedAt *time.Time
	// Outcome is one of the Outcome constants.
	Outcome string
	// Error is the attempt's error, for retried, failed and rescued ones.
	Error string
}

// Attempts returns the last 20 attempts of job id, oldest first, or
// ErrNotFound. The history holds the attempts of jobs run since schema
// version 4. It costs completions nothing: the statements that end other
// attempts record them, and the completed one is read from the job's row.
func (c *ops) Attempts(ctx context.Context, id int64) ([]Attempt, error) {
	as, err := c.jobs().AttemptsOf(ctx, id)
	return converted(as, func(a operate.Attempt) Attempt { return Attempt(a) }), err
}

// CancelMatching cancels every QUEUED and PROCESSING job that f selects,
// as Cancel does each (running jobs' contexts are cancelled on their
// runners), and returns how many it cancelled. It works in transactions of
// a thousand jobs, by ID, up to the newest job there was when it began. f's
// Statuses narrow it further; f.AfterID, f.BeforeID, f.Newest and f.Limit
// are ignored. When it fails part way, the count is of the jobs cancelled
// until then.
func (c *ops) CancelMatching(ctx context.Context, f Filter) (int64, error) {
	return c.jobs().CancelSelected(ctx, operate.Filter[Status](f).Select())
}

// RunnerInfo describes a runner, as it wrote itself down: it writes its row
// as it starts and at every lease renewal (every third of WithLease), and
// deletes it as it stops.
type RunnerInfo struct {
	ID      string
	Queues  []string
	Workers int
	// StartedAt is when it started; SeenAt, when it last wrote its row.
	StartedAt, SeenAt time.Time
	// Leader reports whether it leads the maintenance (see the package
	// documentation's Maintenance).
	Leader bool
}

// Runners returns the runners seen within the last within (every runner
// whose row is kept, if within is not positive), by ID. A runner that died
// leaves its row, which stops being seen; rows not seen for a day are
// deleted as runners start.
func (c *Client) Runners(ctx context.Context, within time.Duration) ([]RunnerInfo, error) {
	rows, err := c.st.Runners(ctx, within)
	return converted(rows, func(r store.RunnerRow) RunnerInfo { return RunnerInfo(r) }), check.Failed(ctx, "runners", err)
}

// SchemaVersion returns the version of the database's schema: 0 if it
// was never migrated, SchemaVersion once Migrate has run.
func (c *Client) SchemaVersion(ctx context.Context) (int, error) { return runner.Version(ctx, c.st) }

// AuditEntry is a line of the audit log: what an operator (Actor) did
// (Action) to what (Target, JSON, such as a job ID or a Filter), and how
// it went (Result), changing how many jobs (Changed).
type AuditEntry struct {
	ID            int64
	At            time.Time
	Actor, Action string
	Target        json.RawMessage
	Result        string
	Changed       int64
}

// RecordAudit appends e to the audit log and returns its ID; e.ID is
// ignored, and a zero e.At is the database's time now. Action must not be
// empty, and Target, if set, must be JSON that PostgreSQL's jsonb stores as
// given; errors wrap ErrInvalidOption. The log keeps what applications
// record: the queue records nothing itself.
func (c *ops) RecordAudit(ctx context.Context, e AuditEntry) (int64, error) {
	return operate.RecordAudit(ctx, c.st, c.db, store.AuditEntry{At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, Result: e.Result, Changed: e.Changed})
}

// AuditLog returns the audit log newest first: up to limit entries (0
// means 100, the most is 1000) with IDs below beforeID, or from the newest
// if beforeID is 0. Pass the last ID returned to read on.
func (c *ops) AuditLog(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error) {
	rows, err := operate.AuditLog(ctx, c.st, c.db, beforeID, limit)
	return converted(rows, func(r store.AuditEntry) AuditEntry {
		return AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Action: r.Action, Target: r.Target, Result: r.Result, Changed: r.Changed}
	}), err
}

// Wait blocks until every job in ids is COMPLETED, FAILED or CANCELLED, and
// returns them in the order of ids. It returns an error wrapping
// ErrNotFound if a job does not exist, and one wrapping ctx.Err() if ctx
// ends first. A FAILED job is final for Wait, though Retry may run it again.
//
// Wait looks at the jobs' statuses in the table, every few milliseconds at
// first and every quarter of a second after a while, asking each time only
// about the jobs still running; it needs no runner in the process.
func (c *Client) Wait(ctx context.Context, ids ...int64) ([]JobRecord, error) {
	out, err := c.jobs().Wait(ctx, ErrNotFound, ids)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("queue: wait: %w", err)
	}
	return out, err
}

// MaxActivityBuckets caps the buckets one Activity call returns: a day of
// minutes. Ask for a longer span with wider buckets.
const MaxActivityBuckets = 1440

// ActivityQuery selects the series Activity returns.
type ActivityQuery struct {
	// Since is where the series starts: its first bucket starts at Since
	// truncated to Bucket (Time.Truncate: whole minutes, hours, UTC days).
	Since time.Time
	// Bucket is each bucket's width, at least a second: time.Minute for
	// the last hour, 15*time.Minute for the last day. From Since to now
	// there may be at most MaxActivityBuckets buckets.
	Bucket time.Duration
	// Queue, if not empty, selects that queue's jobs; empty selects all.
	Queue string
}

// ActivityBucket is one bucket of the series: the jobs that finished in
// [Start, Start+Bucket).
type ActivityBucket struct {
	Start time.Time
	// Completed and Failed count the jobs that finished COMPLETED and
	// FAILED (for good: an attempt that is retried is not counted) in the
	// bucket.
	Completed, Failed int64
	// WaitP50 and WaitP95 are the median and 95th percentile of the queue
	// wait of the jobs counted: from when the job's last attempt became due
	// (JobRecord.RunAt: after a retry's backoff, a Retry or a rescue; for a
	// job scheduled for later, when it came due, not when it was enqueued)
	// to when it started. Zero if no job counted.
	WaitP50, WaitP95 time.Duration
	// RunP50 and RunP95 are the median and 95th percentile of the run time
	// of the jobs counted, from the start of their last attempt to their
	// finish. Jobs that failed without starting (rescued from a runner
	// before they started) count in Failed, not in the percentiles.
	RunP50, RunP95 time.Duration
}

// Activity returns the throughput and latency of finished jobs in buckets
// of q.Bucket, from q.Since to now (by this process's clock): every bucket,
// in order, those without finished jobs zero; none if Since is in the
// future. Percentiles are interpolated between the two nearest jobs, as
// PostgreSQL's percentile_cont.
//
// The series reads the jobs as they are now: a failed job that Retry
// requeued has left its bucket, cancelled jobs are not counted, and neither
// are jobs that failed before an upgrade from schema version 3 or older
// (failed jobs are found through the attempt history, begun in version 4).
// With a Bucket of exactly an hour, the hours rolled up (see Retention
// and history in the package documentation) are read from their roll-ups,
// as they were when the hour was made final, which outlive the jobs: the
// series is the same after they are pruned, and costs a row per hour.
//
// A call costs in proportion to the jobs that finished in the span (read
// through the index of completion times), plus a scan of the attempt
// history. On a
// table of a million jobs over a week (BenchmarkActivity, two shared cores),
// the last hour in minutes takes some 25 ms on PostgreSQL and 90 ms on
// SQLite, the last day in quarter hours (150,000 jobs) some 200 to 300 ms
// on PostgreSQL and 2 s on SQLite: a dashboard should cache the series.
//
// A query without a positive Bucket of at least a second, or with more than
// MaxActivityBuckets buckets, returns an error wrapping ErrInvalidOption.
func (c *Client) Activity(ctx context.Context, q ActivityQuery) ([]ActivityBucket, error) {
	rows, err := operate.Activity(ctx, c.st, q.Since, q.Bucket, q.Queue, MaxActivityBuckets)
	return converted(rows, func(r store.ActivityRow) ActivityBucket {
		return ActivityBucket{Start: r.Start, Completed: r.Completed, Failed: r.Failed,
			WaitP50: r.WaitP50, WaitP95: r.WaitP95, RunP50: r.RunP50, RunP95: r.RunP95}
	}), err
}
