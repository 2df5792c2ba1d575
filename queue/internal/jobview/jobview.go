// Package jobview shows a job as the console's API and the sheaf command
// print it: never its auth context, and with the fields derived from the
// stored job (its wait and run times) computed here, once for both.
package jobview

import (
	"encoding/json"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// Job is a job as shown.
type Job struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Status      queue.Status    `json:"status"`
	Priority    int             `json:"priority"`
	Args        json.RawMessage `json:"args"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	// Claims and Rescues are as in queue.JobRecord.
	Claims   int      `json:"claims"`
	Rescues  int      `json:"rescues"`
	Progress Progress `json:"progress"`
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
	// LimitKey is the job's partition key for its kind's limits.
	LimitKey *string `json:"limit_key,omitempty"`
	// ChildIDs and Output are shown for one job, not in lists.
	ChildIDs []int64         `json:"child_ids,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
}

// Progress is how far a job has got.
type Progress struct {
	Processed int64  `json:"processed"`
	Total     *int64 `json:"total"`
	// For a chunked kind: its records per chunk, the attempt's chunks
	// (once it knows its total) and those done, and the seconds a chunk
	// took on average, from the attempt's start to its end (or to now,
	// while it runs).
	ChunkSize    int      `json:"chunk_size,omitempty"`
	Chunks       *int64   `json:"chunks,omitempty"`
	ChunksDone   int64    `json:"chunks_done,omitempty"`
	ChunkSeconds *float64 `json:"chunk_seconds,omitempty"`
	// ChunkTimes is how long each chunk of the latest attempt took, shown
	// for one job, not in lists; absent before its first chunk.
	ChunkTimes *ChunkTimes `json:"chunk_times,omitempty"`
}

// ChunkTimes is how long the chunks of a chunked job's latest attempt
// took, in seconds, each measured around its ProcessChunk: the count,
// shortest, longest and average of all of them, and the latest ones.
type ChunkTimes struct {
	Count       int64   `json:"count"`
	MinSeconds  float64 `json:"min_seconds"`
	MaxSeconds  float64 `json:"max_seconds"`
	MeanSeconds float64 `json:"mean_seconds"`
	// RecentSeconds are the latest chunks' times (at most 50), oldest
	// first; the last is chunk Count's, the first chunk FirstRecent's.
	RecentSeconds []float64 `json:"recent_seconds"`
	FirstRecent   int64     `json:"first_recent"`
}

// SetChunkTimes fills in p's chunk times from t; none before a chunk.
func (p *Progress) SetChunkTimes(t queue.ChunkTimes) {
	if t.Count == 0 || len(t.Recent) == 0 {
		p.ChunkTimes = nil
		return
	}
	v := &ChunkTimes{Count: t.Count, MinSeconds: t.Min.Seconds(), MaxSeconds: t.Max.Seconds(),
		MeanSeconds: t.Mean().Seconds(), RecentSeconds: make([]float64, len(t.Recent)),
		FirstRecent: t.Count - int64(len(t.Recent)) + 1}
	for i, d := range t.Recent {
		v.RecentSeconds[i] = d.Seconds()
	}
	p.ChunkTimes = v
}

// Latest is the time the latest chunk took.
func (t *ChunkTimes) Latest() float64 { return t.RecentSeconds[len(t.RecentSeconds)-1] }

// SetChunks fills in p's chunks, for a chunked kind of size records per
// chunk whose attempt ran from started to finished (nil: still running).
func (p *Progress) SetChunks(size int, started, finished *time.Time) {
	p.ChunkSize = size
	n := int64(size)
	if p.Total != nil {
		all := (*p.Total + n - 1) / n
		p.Chunks = &all
	}
	p.ChunksDone = (p.Processed + n - 1) / n
	if started == nil || p.ChunksDone == 0 {
		return
	}
	end := time.Now()
	if finished != nil {
		end = *finished
	}
	each := end.Sub(*started).Seconds() / float64(p.ChunksDone)
	p.ChunkSeconds = &each
}

// Attempt is one attempt of a job: one claim of it by a runner.
type Attempt struct {
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

// Of shows rec, with args as its arguments: rec.Payload, or what a
// formatter made of it. Arguments that are not JSON show as null.
func Of(rec *queue.JobRecord, args json.RawMessage) Job {
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage("null")
	}
	v := Job{
		ID: rec.ID, Kind: rec.Kind, Queue: rec.Queue, Status: rec.Status, Priority: rec.Priority,
		Args: args, Attempts: rec.Attempts, MaxAttempts: rec.MaxAttempts,
		Claims: rec.Claims, Rescues: rec.Rescues, Progress: Progress{Processed: rec.Processed, Total: rec.Total},
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

// All shows recs, each with its stored arguments as args makes them.
func All(recs []queue.JobRecord, args func(kind string, payload json.RawMessage) json.RawMessage) []Job {
	out := make([]Job, len(recs))
	for i := range recs {
		out[i] = Of(&recs[i], args(recs[i].Kind, recs[i].Payload))
	}
	return out
}

// Attempts shows a job's attempts.
func Attempts(as []queue.Attempt) []Attempt {
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = Attempt{Number: a.Number, Runner: a.Runner, FinishedAt: a.FinishedAt, Outcome: a.Outcome, Error: a.Error}
		if !a.StartedAt.IsZero() {
			out[i].StartedAt = &as[i].StartedAt
		}
	}
	return out
}

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}
