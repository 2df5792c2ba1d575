package runner

import (
	"context"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Config is what a runner is built from: its settings, and the parts of
// package queue it calls back into. Every field must be set, except
// Attempt, Scheduler, Campaign and Upkeep.
type Config struct {
	ID          string   // the name the runner locks jobs with
	Workers     int      // handlers run at once
	Queues      []string // the queues it works, in turn
	Poll        time.Duration
	Lease       time.Duration
	RescueEvery time.Duration
	Clock       Clock // for batch windows
	Log         *slog.Logger
	Store       store.Store
	DB          *gorm.DB // for the transactions that release children

	Kinds Kinds // the registry's kinds and windows
	Rules Rules // the registry's dependency rules

	// Observe receives every event, once it is committed. It must not
	// panic: package queue recovers an observer's panics before this.
	Observe func(Event)
	// Attempt, if set, is called as an attempt begins, after EventStarted.
	// It returns the context to hand the handler and a function to call,
	// once, with the event the attempt ended as (see queue.Hooks.Attempt).
	Attempt func(ctx context.Context, ex *Execution) (context.Context, func(Event))
	// Preflight checks the database before Start starts anything and
	// returns how many more connections the server accepts (for the
	// advice on the pool, see PoolAdvice); an error is Start's.
	Preflight func(ctx context.Context) (room int, err error)
	// Scheduler fires the registry's schedules while the runner runs.
	Scheduler Part
	// Campaign makes the runner campaign for the maintenance's leadership
	// and, while it leads, rescue expired leases every RescueEvery and run
	// Upkeep (see package maintain). A runner that does not campaign runs
	// neither.
	Campaign bool
	Upkeep   []maintain.Task

	// DefaultBackoff delays retries of jobs of unknown kinds, and of jobs
	// whose own backoff panics; DecodeBackoff reads a job's own backoff as
	// stored.
	DefaultBackoff Backoff
	DecodeBackoff  func([]byte) (Backoff, error)

	Errors Errors
}

// Errors are package queue's sentinels, which the runner hands to handlers
// as causes and to callers as results, and its test for a permanent error.
type Errors struct {
	Started   error // Start after Start or Stop
	Stopping  error // the cause of a job cancelled by a Stop out of time
	Cancelled error // the cause of a job cancelled by Client.Cancel
	LeaseLost error // the cause of a job no longer the runner's
	Timeout   error // the cause of a job that ran past its kind's Timeout
	Invalid   error // wrapped by errors about the caller's arguments
	// Permanent reports whether a handler's error must not be retried.
	Permanent func(error) bool
}

// Kinds looks up the registry's job kinds and queue windows.
type Kinds interface {
	// Lookup returns how to run jobs of kind, or an error saying it is not
	// registered.
	Lookup(kind string) (*Kind, error)
	// Closed returns, of queues, those outside their batch window at now,
	// and the kinds outside theirs.
	Closed(now time.Time, queues []string) (closedQueues map[string]bool, closedKinds []string)
	// NextOpening returns when the next closed window of queues opens, or
	// zero.
	NextOpening(now time.Time, queues []string) time.Time
}

// Kind is how a runner runs jobs of one kind.
type Kind struct {
	// Work decodes the job's payload and runs its handler.
	Work    func(ctx context.Context, ex *Execution) error
	Timeout time.Duration // bounds each attempt; 0: no bound
	Backoff Backoff       // between attempts, unless the job has its own
	Chunked bool          // its handler is a queue.Chunked, which completes after its last chunk
}

// Rules are the registry's dependency rules (see queue.Rule). The runner
// completes a parent and inserts the children its completion makes due in
// one transaction; Rules builds the children.
type Rules interface {
	// For returns the rules in which jobs of kind are parents, by name, so
	// that their locks are always taken in the same order.
	For(kind string) []Rule
	// Child builds the child of a release, with tx, as the job to insert;
	// nil when it cannot be built (the parent then completes without it).
	// attempt completed the last of the parents.
	Child(tx *gorm.DB, attempt *Execution, rel Release) (*store.NewJob, error)
}

// Released is a child job a rule released.
type Released struct {
	Rule        string
	ID          int64
	Kind, Queue string
	Priority    int
	RunID       *string
	ParentIDs   []int64
}

// Part is a part of the runner with goroutines of its own, which the runner
// starts with itself and stops first.
type Part interface {
	Start(ctx context.Context)
	Stop()
}

type noPart struct{}

func (noPart) Start(context.Context) {}
func (noPart) Stop()                 {}

// Clock tells the time for batch windows (see queue.Clock).
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Backoff says how long to wait before an attempt (see queue.Backoff).
type Backoff interface {
	Delay(attempt int) time.Duration
}

// The statuses the runner writes and reads (see queue.Status).
const (
	statusQueued     = "QUEUED"
	statusProcessing = "PROCESSING"
	statusCompleted  = "COMPLETED"
	statusFailed     = "FAILED"
	statusCancelled  = "CANCELLED"
)

// maxPriority is queue.MaxPriority: a new-jobs notification without a
// priority counts as the highest.
const maxPriority = 10
