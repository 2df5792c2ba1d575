package console

import (
	"encoding/json"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// jobView is a job as the API shows it: never its auth context, and its
// arguments through the ArgsFormatter.
type jobView struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Status      queue.Status    `json:"status"`
	Priority    int             `json:"priority"`
	Args        json.RawMessage `json:"args"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	// Claims and Rescues are as in queue.JobRecord.
	Claims   int          `json:"claims"`
	Rescues  int          `json:"rescues"`
	Progress progressView `json:"progress"`
	// The times are the database's.
	CreatedAt   time.Time  `json:"created_at"`
	RunAt       time.Time  `json:"run_at"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	// WaitSeconds is how long the last attempt waited, from its run time to
	// its start; RunSeconds how long it ran, to completion.
	WaitSeconds *float64 `json:"wait_seconds"`
	RunSeconds  *float64 `json:"run_seconds"`
	// LockedBy is the runner that holds the job, until LockedUntil; for a
	// COMPLETED job, the runner that completed it.
	LockedBy       *string    `json:"locked_by"`
	LockedUntil    *time.Time `json:"locked_until"`
	LastError      *string    `json:"last_error"`
	IdempotencyKey *string    `json:"idempotency_key"`
	CorrelationID  *string    `json:"correlation_id"`
	RunID          *string    `json:"run_id"`
	Period         *string    `json:"period"`
	ParentIDs      []int64    `json:"parent_ids"`
	// ChildIDs and Output are shown for one job, not in lists.
	ChildIDs []int64         `json:"child_ids,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	// LimitKey is the job's partition key for its kind's limits.
	LimitKey *string `json:"limit_key,omitempty"`
}

// attemptView is one attempt of a job: one claim of it by a runner.
type attemptView struct {
	// Number is the claim's number: 1 for the first.
	Number int    `json:"number"`
	Runner string `json:"runner"`
	// StartedAt is null for an attempt claimed and not started.
	StartedAt *time.Time `json:"started_at"`
	// FinishedAt is null while it runs.
	FinishedAt *time.Time `json:"finished_at"`
	// Outcome is completed, retried, failed, cancelled, rescued or running.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

type progressView struct {
	Processed int64  `json:"processed"`
	Total     *int64 `json:"total"`
}

// view shows rec.
func (c *console) view(rec *queue.JobRecord) jobView {
	v := jobView{
		ID: rec.ID, Kind: rec.Kind, Queue: rec.Queue, Status: rec.Status, Priority: rec.Priority,
		Args: c.args(rec.Kind, rec.Payload), Attempts: rec.Attempts, MaxAttempts: rec.MaxAttempts,
		Claims: rec.Claims, Rescues: rec.Rescues, Progress: progressView{Processed: rec.Processed, Total: rec.Total},
		CreatedAt: rec.CreatedAt, RunAt: rec.RunAt, StartedAt: rec.StartedAt, CompletedAt: rec.CompletedAt,
		LockedBy: rec.LockedBy, LockedUntil: rec.LockedUntil, LastError: rec.LastError,
		IdempotencyKey: rec.IdempotencyKey, CorrelationID: rec.CorrelationID, RunID: rec.RunID, Period: rec.Period,
		ParentIDs: []int64(rec.ParentIDs), LimitKey: rec.LimitKey,
	}
	if v.ParentIDs == nil {
		v.ParentIDs = []int64{}
	}
	if rec.StartedAt != nil && !rec.StartedAt.Before(rec.RunAt) {
		v.WaitSeconds = seconds(rec.StartedAt.Sub(rec.RunAt))
	}
	if d := rec.Duration(); d > 0 {
		v.RunSeconds = seconds(d)
	}
	return v
}

// views shows recs.
func (c *console) views(recs []queue.JobRecord) []jobView {
	out := make([]jobView, len(recs))
	for i := range recs {
		out[i] = c.view(&recs[i])
	}
	return out
}

// args passes a job's arguments through the ArgsFormatter.
func (c *console) args(kind string, payload json.RawMessage) json.RawMessage {
	if c.cfg.formatArgs != nil {
		payload = c.cfg.formatArgs(kind, payload)
	}
	if len(payload) == 0 || !json.Valid(payload) {
		return json.RawMessage("null")
	}
	return payload
}

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}
