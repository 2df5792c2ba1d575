package queue

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/attach"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Status is where a job is in its lifecycle (see Lifecycle in the package
// documentation).
type Status string

// The statuses.
const (
	StatusQueued     Status = "QUEUED"
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	StatusFailed     Status = "FAILED"
	StatusCancelled  Status = "CANCELLED"
)

// Statuses returns every status, in lifecycle order, in a new slice.
func Statuses() []Status {
	return []Status{StatusQueued, StatusProcessing, StatusCompleted, StatusFailed, StatusCancelled}
}

// Terminal reports whether s is final unless someone retries the job.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Priorities run from MinPriority to MaxPriority; higher runs first.
const (
	MinPriority     = 1
	MaxPriority     = 10
	DefaultPriority = 5
	// DefaultMaxAttempts is how many times a job runs before it fails.
	DefaultMaxAttempts = 3
	// DefaultQueue is the queue of kinds registered without Queue.
	DefaultQueue = "default"
)

// Auth is a job's authorisation context: the claims of the user who
// submitted it (role, scope, county, ...), handed to its handler. sheaf
// never logs it: its String and LogValue print a placeholder.
type Auth map[string]any

// String hides the claims.
func (Auth) String() string { return "[auth redacted]" }

// LogValue hides the claims from slog.
func (Auth) LogValue() slog.Value { return slog.StringValue("[auth redacted]") }

// JobRecord is a job as stored. It is also the gorm model of the jobs table,
// so it can be queried with gorm directly.
type JobRecord struct {
	ID             int64           `gorm:"column:id;primaryKey"`
	Kind           string          `gorm:"column:kind"`
	Queue          string          `gorm:"column:queue"`
	Status         Status          `gorm:"column:status"`
	Priority       int             `gorm:"column:priority"`
	Payload        json.RawMessage `gorm:"column:payload;type:jsonb"`
	IdempotencyKey *string         `gorm:"column:idempotency_key"`
	CorrelationID  *string         `gorm:"column:correlation_id"`
	// Attempts counts the attempts that count towards MaxAttempts: those
	// that ran to a result, and those whose runner died while it ran them,
	// unless they were put back uncounted (see Claims and Rescues).
	Attempts    int `gorm:"column:attempts"`
	MaxAttempts int `gorm:"column:max_attempts"`
	// Claims counts how often runners have claimed the job, whether or
	// not the attempt counted. Each claim has its own number, so a result
	// that arrives from an earlier claim is refused.
	Claims int `gorm:"column:claims"`
	// Rescues counts the times the job was rescued from a runner that
	// stopped renewing its lease, since one of its attempts last finished.
	// A job with rescues is a suspect (see Poison jobs in the package
	// documentation).
	Rescues int `gorm:"column:rescues"`

	RunAt       time.Time  `gorm:"column:run_at"`
	LockedUntil *time.Time `gorm:"column:locked_until"`
	// LockedBy names the runner that holds the job while it is PROCESSING,
	// and the runner that completed it once it is COMPLETED.
	LockedBy    *string    `gorm:"column:locked_by"`
	CreatedAt   time.Time  `gorm:"column:created_at"`
	StartedAt   *time.Time `gorm:"column:started_at"`
	CompletedAt *time.Time `gorm:"column:completed_at"`
	Processed   int64      `gorm:"column:processed"`
	Total       *int64     `gorm:"column:total"`
	// LastError is the error of the latest failed attempt, kept when a
	// later attempt succeeds.
	LastError *string `gorm:"column:last_error"`
	// Auth is the submitter's claims; see Auth.
	Auth Auth `gorm:"column:auth;serializer:json"`
	// RunID names the schedule tick that created the job, or the tick of
	// the parent that released it; empty for jobs enqueued by hand.
	RunID *string `gorm:"column:run_id"`
	// Period groups jobs for dependency rules: a schedule stamps its tick's
	// local date (2006-01-02), and children take their parents'.
	Period *string `gorm:"column:period"`
	// ParentIDs are the jobs whose completion released this one.
	ParentIDs IDs `gorm:"column:parent_ids;type:bigint[]"`
	// Output is what the job's handler left for its children (SetOutput).
	Output json.RawMessage `gorm:"column:output;type:jsonb"`
	// Metadata is carried with the job from its enqueue to its attempts:
	// the W3C trace context (traceparent, tracestate) of the call that
	// enqueued it (see TraceContext and Hooks), or what Hooks.Release made
	// of its parents'. Nil for a job without.
	Metadata Metadata `gorm:"column:meta;type:bytes"`
	// LimitKey is the job's partition key, for its kind's limits (see
	// KeyLimit); nil for a kind without a key function.
	LimitKey *string `gorm:"column:limit_key"`
}

// Metadata is a job's metadata (JobRecord.Metadata).
type Metadata map[string]string

// Scan reads metadata as the database keeps it.
func (m *Metadata) Scan(src any) error {
	d, err := store.ScanMetadata(src)
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	*m = d
	return nil
}

// TableName tells gorm the table.
func (JobRecord) TableName() string { return jobsTable }

// IDs is a list of job IDs, stored as a PostgreSQL bigint[].
type IDs []int64

// Scan reads a bigint[] in PostgreSQL's text form, {1,2,3}.
func (ids *IDs) Scan(src any) error {
	v, err := store.ParseIDList(src)
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	*ids = v
	return nil
}

// Value writes the list in PostgreSQL's text form.
func (ids IDs) Value() (driver.Value, error) { return store.IDListValue(ids), nil }

// Duration is how long the last attempt took, from start to completion; zero
// if the job has not finished.
func (r *JobRecord) Duration() time.Duration {
	if r.StartedAt == nil || r.CompletedAt == nil {
		return 0
	}
	return r.CompletedAt.Sub(*r.StartedAt)
}

// Args is implemented by job payloads. Kind names the job type, and must be
// the same for every value of the type; the payload is stored as JSON.
type Args interface {
	Kind() string
}

// Job is what a handler receives: the stored job with its payload decoded.
type Job[A Args] struct {
	ID            int64
	Kind          string
	Queue         string
	Args          A
	Priority      int
	Attempt       int // 1 for the first run
	MaxAttempts   int
	CorrelationID string
	Auth          Auth
	CreatedAt     time.Time
	StartedAt     time.Time
	// RunID and Period are the schedule run and period the job belongs
	// to, if any; see JobRecord.
	RunID  string
	Period string
	// ParentIDs are the jobs whose completion released this one, if a
	// dependency rule created it; Parents loads them.
	ParentIDs []int64

	exec execution // nil in a Job built by hand, as in a handler's unit test
}

// execution is the attempt that runs a Job: a runner's, or a unit test's
// from package queuetest.
type execution = attach.Execution

// attach gives a Job built by hand an execution, for package queuetest.
func (j *Job[A]) attach(ex execution) { j.exec = ex }

func init() {
	attach.Job = func(job any, ex attach.Execution) bool {
		j, ok := job.(interface{ attach(execution) })
		if ok {
			j.attach(ex)
		}
		return ok
	}
}

// attempt is a runner's execution of a job, with its hooks.
type attempt struct {
	*runner.Execution
	hooks []Hooks
}

// Chunk tells the Chunk hooks that a chunk was processed.
func (a *attempt) Chunk(ctx context.Context, info ChunkInfo) {
	for _, h := range a.hooks {
		if h.Chunk != nil {
			h.Chunk(ctx, info)
		}
	}
}

// recordOf is the JobRecord of a claimed row.
func recordOf(row *runner.Row) JobRecord {
	return JobRecord{ID: row.ID, Kind: row.Kind, Queue: row.Queue, Status: Status(row.Status), Priority: row.Priority,
		Payload: row.Payload, CorrelationID: row.CorrelationID, Attempts: row.Attempts, MaxAttempts: row.MaxAttempts,
		Claims: row.Claims, Rescues: row.Rescues, RunAt: row.RunAt, CreatedAt: row.CreatedAt, StartedAt: row.StartedAt,
		Total: row.Total, LastError: row.LastError, Auth: row.Auth, RunID: row.RunID, Period: row.Period,
		ParentIDs: row.ParentIDs, Metadata: row.Metadata}
}

// SetOutput stores v, as JSON, as the job's output, for the jobs that depend
// on it to read (Parents). It is written at once; an attempt that fails
// after setting it leaves it to be replaced, since each claim clears it.
// It returns ErrLeaseLost if the job is no longer this runner's to run.
func (j *Job[A]) SetOutput(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err == nil {
		err = check.Encoded("output", v, b, false)
	}
	if err != nil {
		return fmt.Errorf("queue: output of job %d: %w", j.ID, err)
	}
	if j.exec == nil {
		return nil
	}
	return j.exec.SetOutput(ctx, string(b))
}

// Parents returns the jobs whose completion released this one, with their
// outputs, in ID order.
func (j *Job[A]) Parents(ctx context.Context) ([]JobRecord, error) {
	if len(j.ParentIDs) == 0 || j.exec == nil {
		return nil, nil
	}
	var out []JobRecord
	if err := j.exec.Jobs(ctx, j.ParentIDs, &out); err != nil {
		return nil, fmt.Errorf("queue: parents of job %d: %w", j.ID, err)
	}
	return out, nil
}

// CompleteTx completes the job inside tx, a transaction the handler began
// on the queue's database, so that the completion commits or rolls back
// with the rows the handler writes in tx: its effects happen exactly once.
// It runs the runner's guarded completion (the job must still be PROCESSING
// in this attempt's claim), and releases in tx the children of dependency
// rules whose parents are then all complete. It returns ErrLeaseLost if the
// job is no longer this attempt's (cancelled, rescued, or completed by an
// earlier transaction); on that or any other error, roll tx back.
//
// Once the handler returns, the runner reads whether tx committed (one read
// of the job's row by primary key). If it did, the job is COMPLETED and the
// attempt reported as completed, even if the handler then returned an
// error. If not (a rollback, or a transaction left open, which the runner
// rolls back), the attempt failed, with the handler's error or one saying
// the transaction did not commit, and retries or fails as usual.
//
// Calling it again in the same transaction does nothing; calling it in a
// new one, after an earlier one rolled back, completes the job in that one.
// Call it last, just before the commit: from then on tx holds the job's
// row, and cancelling the job waits for tx (lease renewals pass it by). On
// SQLite a transaction that has written holds the write lock that every
// writer, the queue's own included, waits for: keep it short.
//
// It returns an error wrapping ErrInvalidOption for a nil tx, one that is
// not a transaction, one on a database other than the queue's, and for a
// job of a Chunked handler, which completes after its last chunk. On a Job
// built by hand, as in a handler's unit test, it does nothing.
func (j *Job[A]) CompleteTx(ctx context.Context, tx *gorm.DB) error {
	if j.exec == nil {
		return nil
	}
	return j.exec.CompleteTx(ctx, tx)
}

// SetProgress records how many of total records the job has processed
// (chunked handlers' is saved for them). It returns ErrLeaseLost if the job
// is no longer this runner's (cancelled or rescued): the handler should
// stop.
func (j *Job[A]) SetProgress(ctx context.Context, processed, total int64) error {
	if j.exec == nil {
		return nil
	}
	return j.exec.SetProgress(ctx, processed, total)
}

// Handler works jobs of one kind. Work returns nil on success; an error
// retries the job after its backoff, or fails it when it has no attempts
// left or the error is Permanent. ctx is cancelled when the job is
// cancelled, times out, loses its lease, or the runner stops without time
// to let it finish (context.Cause tells which); in the last case the job is
// already back in the queue, and what the handler then returns or saves
// through Job is refused, so it should return soon.
type Handler[A Args] interface {
	Work(ctx context.Context, job *Job[A]) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc[A Args] func(ctx context.Context, job *Job[A]) error

// Work calls f(ctx, job).
func (f HandlerFunc[A]) Work(ctx context.Context, job *Job[A]) error { return f(ctx, job) }
