package runner

import "time"

// EventType says what happened to a job; the values are queue.EventType's.
type EventType int

// The events a runner reports, as package queue numbers them.
const (
	EventStarted EventType = iota + 1
	EventCompleted
	EventRetrying
	EventFailed
	EventCancelled
	EventRescued
	EventRequeued
	EventRejected
	EventReleased
	EventScheduled
)

// Event is what the runner reports of a job, field for field a queue.Event.
type Event struct {
	Type          EventType
	JobID         int64
	Kind          string
	Queue         string
	Priority      int
	Attempt       int
	MaxAttempts   int
	CorrelationID string
	Duration      time.Duration
	Err           error
	RetryIn       time.Duration
	Rule          string
	ParentIDs     []int64
	RunID         string
}

// Row is a job as the runner holds it from its claim to its result (see
// queue.JobRecord, whose fields these are).
type Row struct {
	ID            int64
	Kind, Queue   string
	Status        string
	Priority      int
	Payload       []byte
	CorrelationID *string
	Attempts      int
	MaxAttempts   int
	Claims        int
	Rescues       int
	RunAt         time.Time
	CreatedAt     time.Time
	StartedAt     *time.Time
	Total         *int64
	LastError     *string
	Auth          map[string]any
	RunID         *string
	Period        *string
	ParentIDs     []int64
	Metadata      map[string]string

	backoffJSON []byte // the job's own backoff, as stored
}
