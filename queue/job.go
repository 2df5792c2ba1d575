package queue

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// Status is where a job is in its lifecycle:
//
//	QUEUED ──claim──▶ PROCESSING ──▶ COMPLETED
//	   │                 │  │
//	   │                 │  └──▶ FAILED (last attempt, or a permanent error)
//	   │                 └──▶ QUEUED (retry after a backoff, or rescued)
//	   └──cancel──▶ CANCELLED ◀──cancel── PROCESSING
//
// FAILED and CANCELLED jobs go back to QUEUED when retried.
type Status string

// The statuses.
const (
	StatusQueued     Status = "QUEUED"
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	StatusFailed     Status = "FAILED"
	StatusCancelled  Status = "CANCELLED"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusQueued, StatusProcessing, StatusCompleted, StatusFailed, StatusCancelled}

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
// submitted it (role, scope, county, ...), stored with the job and handed to
// its handler, which applies them as the user's request would have. sheaf
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
	Attempts       int             `gorm:"column:attempts"`
	MaxAttempts    int             `gorm:"column:max_attempts"`
	RunAt          time.Time       `gorm:"column:run_at"`
	LockedUntil    *time.Time      `gorm:"column:locked_until"`
	LockedBy       *string         `gorm:"column:locked_by"`
	CreatedAt      time.Time       `gorm:"column:created_at"`
	StartedAt      *time.Time      `gorm:"column:started_at"`
	CompletedAt    *time.Time      `gorm:"column:completed_at"`
	Processed      int64           `gorm:"column:processed"`
	Total          *int64          `gorm:"column:total"`
	LastError      *string         `gorm:"column:last_error"`
	// Auth is the submitter's claims; see Auth.
	Auth Auth `gorm:"column:auth;serializer:json"`

	backoffJSON []byte // the job's own backoff, as stored; set by claims
}

// TableName tells gorm the table.
func (JobRecord) TableName() string { return jobsTable }

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

	exec *execution
}

// SetProgress records how many of total records the job has processed. It
// returns ErrLeaseLost if the job is no longer this runner's to run
// (cancelled or rescued); a handler should then stop. Chunked handlers have
// their progress saved for them after every chunk.
func (j *Job[A]) SetProgress(ctx context.Context, processed, total int64) error {
	return j.exec.setProgress(ctx, processed, total)
}

// Handler works jobs of one kind. Work returns nil on success. An error makes
// the job retry after its backoff, or fail when it has no attempts left or
// the error is Permanent. ctx is cancelled when the job is cancelled, times
// out, loses its lease, or the runner stops without time to let it finish;
// context.Cause(ctx) tells which.
type Handler[A Args] interface {
	Work(ctx context.Context, job *Job[A]) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc[A Args] func(ctx context.Context, job *Job[A]) error

// Work calls f(ctx, job).
func (f HandlerFunc[A]) Work(ctx context.Context, job *Job[A]) error { return f(ctx, job) }
