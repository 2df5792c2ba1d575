// Package option holds what the queue's options set, with their checks: a
// job's settings (a kind's defaults, which a job's options override) and a
// runner's. The queue package's option functions wrap these setters, so
// that it keeps only their declarations and documentation.
package option

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/enqueue"
	"github.com/sheaf-dev/sheaf/queue/internal/limit"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Job is what a kind has by default and a job may override.
type Job struct {
	Queue                 string
	Priority, MaxAttempts int
	Backoff               Backoff
	// OwnBackoff is a job's own backoff, encoded to be stored with it; nil
	// for a kind's.
	OwnBackoff              []byte
	Retain                  maintain.Durations // a kind's (Retain)
	Limits                  []limit.Declared   // a kind's (KindLimit, KeyLimit)
	LimitKey                limit.Key          // KeyLimit's
	Timeout                 time.Duration
	ChunkSize               int
	RunAt                   time.Time
	Delay                   time.Duration
	Key, Correlation        string
	RunID, Period           string
	Auth                    map[string]any
	TraceParent, TraceState string
	Window                  calendar.Window // a kind's (During)
}

// Backoff is the queue package's Backoff, which the runner's matches.
type Backoff interface {
	Delay(attempt int) time.Duration
}

// Declare adds a limit of scope that a kind declares, checked (KindLimit,
// KeyLimit).
func (o *Job) Declare(scope string, l limit.Declared) error {
	l.Scope = scope
	o.Limits = append(o.Limits, l)
	return limit.Check(store.Limit{Scope: scope, Concurrency: l.Concurrency, Rate: l.Rate, Period: l.Per, Fair: l.Fair, Weights: l.Weights})
}

// SetQueue sets the queue (OnQueue).
func (o *Job) SetQueue(name string) error {
	return check.Set(&o.Queue, name, check.QueueName("OnQueue", name))
}

// SetPriority sets the priority, lo to hi (Priority).
func (o *Job) SetPriority(p, lo, hi int) error {
	return check.Set(&o.Priority, p, check.Within("priority", p, lo, hi))
}

// SetMaxAttempts sets the attempts, 1 to 1000 (MaxAttempts).
func (o *Job) SetMaxAttempts(n int) error {
	return check.Set(&o.MaxAttempts, n, check.Within("max attempts", n, 1, 1000))
}

// SetTimeout sets a kind's attempt timeout (Timeout).
func (o *Job) SetTimeout(d time.Duration) error {
	return check.Set(&o.Timeout, d, check.Refuse(d <= 0, "timeout %v not positive", d))
}

// SetChunkSize sets a chunked kind's chunk size, 1 to most (ChunkSize).
func (o *Job) SetChunkSize(n, most int) error {
	return check.Set(&o.ChunkSize, n, check.Within("chunk size", n, 1, most))
}

// SetRunAt sets when the job runs (RunAt).
func (o *Job) SetRunAt(t time.Time) error {
	return check.Set(&o.RunAt, t, check.Refuse(t.IsZero(), "zero RunAt time"))
}

// SetDelay sets how long the job waits (After).
func (o *Job) SetDelay(d time.Duration) error {
	return check.Set(&o.Delay, d, check.Refuse(d < 0, "negative delay %v", d))
}

// SetKey sets the idempotency key (IdempotencyKey).
func (o *Job) SetKey(key string) error {
	return check.Set(&o.Key, key, check.Name("IdempotencyKey", "idempotency key", key, 512))
}

// SetCorrelation sets the correlation ID (CorrelationID).
func (o *Job) SetCorrelation(id string) error {
	if len(id) > 512 {
		return check.Invalid("correlation ID longer than 512 bytes")
	}
	return check.Set(&o.Correlation, id, check.Text("CorrelationID", id))
}

// SetAuth sets the submitter's claims (AuthContext), checked as the job is
// prepared.
func (o *Job) SetAuth(claims map[string]any) error {
	o.Auth = claims
	return nil
}

// SetRunID sets the job's run (InRun).
func (o *Job) SetRunID(runID string) error {
	return check.Set(&o.RunID, runID, check.Name("InRun", "run ID", runID, 512))
}

// SetPeriod sets the job's period (InPeriod).
func (o *Job) SetPeriod(period string) error {
	return check.Set(&o.Period, period, check.Name("InPeriod", "period", period, 128))
}

// Stamp sets the idempotency key, and the run and period unless empty, of
// a job that a schedule's tick or a dependency rule creates, over its own.
func (o *Job) Stamp(key, runID, period string) error {
	err := o.SetKey(key)
	if err == nil && runID != "" {
		err = o.SetRunID(runID)
	}
	if err == nil && period != "" {
		err = o.SetPeriod(period)
	}
	return err
}

// SetTrace sets the W3C trace context of the submitting request
// (TraceContext).
func (o *Job) SetTrace(traceparent, tracestate string) error {
	if traceparent == "" || len(traceparent) > 256 || len(tracestate) > 512 {
		return check.Invalid("traceparent must have 1 to 256 bytes and tracestate at most 512")
	}
	if err := check.Texts("TraceContext", traceparent, "TraceContext", tracestate); err != nil {
		return err
	}
	o.TraceParent, o.TraceState = traceparent, tracestate
	return nil
}

// Row is the row of a job of kind with payload and these settings.
func (o *Job) Row(kind string, payload []byte) (store.NewJob, error) {
	j := store.NewJob{Kind: kind, Queue: o.Queue, Priority: o.Priority, Attempts: o.MaxAttempts, Payload: string(payload),
		Delay: o.Delay, RunAt: enqueue.Optional(o.RunAt), Key: enqueue.Optional(o.Key),
		Correlation: enqueue.Optional(o.Correlation), RunID: enqueue.Optional(o.RunID), Period: enqueue.Optional(o.Period),
		Metadata: enqueue.TraceMetadata(o.TraceParent, o.TraceState)}
	if o.OwnBackoff != nil {
		j.Backoff = enqueue.Optional(string(o.OwnBackoff))
	}
	var err error
	if j.Auth, err = enqueue.Auth(o.Auth); err == nil {
		j.LimitKey, err = o.LimitKey.Of(payload)
	}
	return j, err
}

// Runner is a runner's settings, but for those whose types the queue
// package declares.
type Runner struct {
	Workers     int
	Queues      []string
	Poll, Lease time.Duration
	RescueEvery time.Duration
	ID          string
	Tasks       []maintain.Task // WithMaintenance's
	NoCampaign  bool            // WithoutMaintenance
}

// AddTasks adds maintenance tasks (WithMaintenance), refusing a nil one.
func (r *Runner) AddTasks(tasks []maintain.Task) error {
	for i, t := range tasks {
		if t == nil {
			return check.Invalid("WithMaintenance: task %d is nil", i)
		}
	}
	r.Tasks = append(r.Tasks, tasks...)
	return nil
}

// Campaign returns whether the runner campaigns for the maintenance's
// leadership, and the tasks it runs besides the rescue while it leads:
// upkeep's (the client's), then its own.
func (r *Runner) Campaign(upkeep func() []maintain.Task) (bool, []maintain.Task, error) {
	if !r.NoCampaign {
		return true, append(upkeep(), r.Tasks...), nil
	}
	if len(r.Tasks) > 0 {
		return false, nil, check.Invalid("WithoutMaintenance with WithMaintenance: a runner that does not campaign would never run its %d tasks", len(r.Tasks))
	}
	return false, nil, nil
}

// SetWorkers sets the workers, 1 to most (WithWorkers).
func (r *Runner) SetWorkers(n, most int) error {
	return check.Set(&r.Workers, n, check.Within("workers", n, 1, most))
}

// SetQueues sets the queues worked (WithQueues).
func (r *Runner) SetQueues(names []string) error {
	if len(names) == 0 {
		return check.Invalid("WithQueues needs at least one queue")
	}
	for _, n := range names {
		if err := check.QueueName("WithQueues", n); err != nil {
			return err
		}
	}
	r.Queues = append([]string(nil), names...)
	return nil
}

// SetPoll sets the poll interval, 10ms to 1h (WithPollInterval).
func (r *Runner) SetPoll(d time.Duration) error {
	return check.Set(&r.Poll, d, check.Within("poll interval", d, 10*time.Millisecond, time.Hour))
}

// SetLease sets the lease, 500ms to 24h (WithLease).
func (r *Runner) SetLease(d time.Duration) error {
	return check.Set(&r.Lease, d, check.Within("lease", d, 500*time.Millisecond, 24*time.Hour))
}

// SetRescueEvery sets the rescue interval, 10ms to 24h
// (WithRescueInterval).
func (r *Runner) SetRescueEvery(d time.Duration) error {
	return check.Set(&r.RescueEvery, d, check.Within("rescue interval", d, 10*time.Millisecond, 24*time.Hour))
}

// SetID sets the runner's name (WithRunnerID).
func (r *Runner) SetID(id string) error {
	return check.Set(&r.ID, id, check.Name("WithRunnerID", "runner ID", id, 200))
}
