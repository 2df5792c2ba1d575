package queue

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/hook"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// EventType says what happened to a job.
type EventType int

// The events a runner reports.
const (
	// EventStarted: a runner claimed the job and began an attempt.
	EventStarted EventType = iota + 1
	// EventCompleted: the attempt succeeded and the job is COMPLETED.
	EventCompleted
	// EventRetrying: the attempt failed; the job is QUEUED again and runs
	// after Event.RetryIn.
	EventRetrying
	// EventFailed: the attempt failed and the job is FAILED (the dead
	// letter): no attempts were left or the error was permanent. Also
	// after EventRescued of a last attempt; Err then wraps ErrLeaseLost.
	EventFailed
	// EventCancelled: the job was cancelled while it ran, and its handler
	// has returned.
	EventCancelled
	// EventRescued: the job's lease expired (its runner died or hung), and
	// a runner put it back in the queue, or failed it if it had no attempts
	// left. Attempt is the attempt that was lost.
	EventRescued
	// EventRequeued: the job went back to the queue without its attempt
	// counting: Runner.Stop ran out of time while it ran, or it was
	// claimed ahead of need and waited too long for a worker.
	EventRequeued
	// EventRejected: the attempt finished but the job was no longer this
	// runner's (rescued or cancelled meanwhile), so its result was dropped.
	EventRejected
	// EventReleased: a dependency rule created a job because its parents
	// completed. JobID and Kind are the new job's; ParentIDs its parents.
	EventReleased
	// EventScheduled: a schedule's tick created its jobs, on the runner
	// that created them: Schedule, RunID and Jobs say which; JobID is 0.
	EventScheduled
)

// String returns the event's name in lower case, as "completed".
func (t EventType) String() string {
	if t >= EventStarted && t <= EventScheduled {
		return eventNames[t-EventStarted]
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

var eventNames = [...]string{"started", "completed", "retrying", "failed", "cancelled", "rescued", "requeued", "rejected", "released", "scheduled"}

// Event is something that happened to a job, as an observer sees it.
type Event struct {
	Type          EventType
	JobID         int64
	Kind          string
	Queue         string
	Priority      int
	Attempt       int
	MaxAttempts   int
	CorrelationID string
	// Duration is how long the attempt ran, for completed, retrying,
	// failed and cancelled events.
	Duration time.Duration
	// Err is the attempt's error, for retrying and failed events.
	Err error
	// RetryIn is the backoff before the next attempt, for retrying events.
	RetryIn time.Duration
	// Rule and ParentIDs name the rule and the parents of a released job.
	Rule      string
	ParentIDs []int64
	// RunID is the run of the job, or of the tick, if any.
	RunID string
	// Schedule and Jobs describe a scheduled event.
	Schedule string
	Jobs     int
}

// Observer receives job events, for metrics and for acting on dead
// letters. Observe is called from runner goroutines, possibly at once,
// after the event is committed; it must be quick and safe for concurrent
// use, and must not call runtime.Goexit (in tests: t.FailNow, require),
// which would end the runner's goroutine. A panic in it is recovered and
// logged.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// observers returns the function that reports an event to the Observe
// hooks, then to the observer: an observer that sees an event finds the
// hooks' instruments already updated.
func observers(hooks []Hooks, obs Observer, log *slog.Logger) func(Event) {
	var fn func(Event)
	if obs != nil {
		fn = obs.Observe
	}
	return hook.Observers(log, hooks, func(h Hooks) func(Event) { return h.Observe }, fn)
}

// eventOf is the Event of one the runner reports.
func eventOf(e runner.Event) Event {
	return Event{Type: EventType(e.Type), JobID: e.JobID, Kind: e.Kind, Queue: e.Queue, Priority: e.Priority,
		Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, CorrelationID: e.CorrelationID, Duration: e.Duration,
		Err: e.Err, RetryIn: e.RetryIn, Rule: e.Rule, ParentIDs: e.ParentIDs, RunID: e.RunID}
}
