package queuetest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/attach"
)

// NewJob returns a job of args as a runner hands it to a handler on its
// first attempt: ID 1, args's kind, queue "default", the default priority,
// attempt 1 of queue.DefaultMaxAttempts, created and started now. Set its
// fields (Auth, Attempt, ParentIDs, ...) for the case under test. Its
// SetProgress, SetOutput and CompleteTx do nothing and Parents returns
// nothing unless an Attempt runs it.
func NewJob[A queue.Args](args A) *queue.Job[A] {
	now := time.Now()
	return &queue.Job[A]{
		ID: 1, Kind: args.Kind(), Queue: queue.DefaultQueue, Args: args, Priority: queue.DefaultPriority,
		Attempt: 1, MaxAttempts: queue.DefaultMaxAttempts, CreatedAt: now, StartedAt: now,
	}
}

// Attempt runs a handler against a job built in memory, as a runner's
// attempt would, and records what the handler did through the job: its
// progress, its output and its CompleteTx. Set its fields before Run; its
// methods are safe for concurrent use, so another goroutine may Cancel
// the attempt while it runs.
type Attempt[A queue.Args] struct {
	// Job is the job the handler receives; NewAttempt builds it with
	// NewJob.
	Job *queue.Job[A]
	// Timeout is the kind's Timeout: when it passes, the handler's context
	// ends with cause queue.ErrTimeout. Zero means none.
	Timeout time.Duration
	// Parents are what Job.Parents returns: those whose IDs are in
	// Job.ParentIDs, in ID order.
	Parents []queue.JobRecord
	// OnProgress, if set, is called on the handler's goroutine after each
	// SetProgress, before it returns: a test can Cancel from there to
	// cancel the job at a known point.
	OnProgress func(processed, total int64)

	mu         sync.Mutex
	cancelled  bool
	cancel     context.CancelCauseFunc // of the running attempt
	processed  int64
	total      int64
	output     json.RawMessage
	completeTx bool
	cause      error
}

// NewAttempt returns an attempt at NewJob(args).
func NewAttempt[A queue.Args](args A) *Attempt[A] {
	return &Attempt[A]{Job: NewJob(args)}
}

// Run runs h against a.Job on the calling goroutine, with a context that
// ends as a runner's would: when ctx ends, when a.Timeout passes (cause
// queue.ErrTimeout) or when Cancel is called (cause queue.ErrCancelled).
// It returns the handler's error, or, for a handler that panicked, an
// error saying so with the stack. Call it again, after raising
// a.Job.Attempt, to test a retry; what was recorded stays unless replaced.
func (a *Attempt[A]) Run(ctx context.Context, h queue.Handler[A]) (err error) {
	if h == nil || a.Job == nil {
		return fmt.Errorf("queuetest: %w: Run needs a handler and a job", queue.ErrInvalidOption)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if a.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, a.Timeout, queue.ErrTimeout)
		defer stop()
	}
	a.mu.Lock()
	a.cancel, a.cause = cancel, nil
	if a.cancelled {
		cancel(queue.ErrCancelled)
	}
	a.mu.Unlock()
	attach.Job(a.Job, execution[A]{a})
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("queuetest: job %d (%s) panicked: %v\n%s", a.Job.ID, a.Job.Kind, v, debug.Stack())
		}
		a.mu.Lock()
		a.cause, a.cancel = context.Cause(ctx), nil
		a.mu.Unlock()
	}()
	return h.Work(ctx, a.Job)
}

// Cancel cancels the job as Client.Cancel would: the running handler's
// context ends with cause queue.ErrCancelled, and SetProgress and
// SetOutput return queue.ErrLeaseLost from then on. Called before Run, it
// makes Run start cancelled.
func (a *Attempt[A]) Cancel() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancelled = true
	if a.cancel != nil {
		a.cancel(queue.ErrCancelled)
	}
}

// Progress returns the progress the handler last recorded with
// Job.SetProgress.
func (a *Attempt[A]) Progress() (processed, total int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.processed, a.total
}

// Output returns what the handler last stored with Job.SetOutput, as JSON;
// nil if nothing.
func (a *Attempt[A]) Output() json.RawMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.output)
}

// CompletedTx reports whether the handler called Job.CompleteTx with a
// transaction (whether that transaction committed is the handler's
// database's to tell).
func (a *Attempt[A]) CompletedTx() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.completeTx
}

// Cause returns why the handler's context had ended when the last Run
// returned: nil if it had not, queue.ErrCancelled, queue.ErrTimeout, or
// the cause of Run's context.
func (a *Attempt[A]) Cause() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cause
}

// execution is an Attempt as its job's execution.
type execution[A queue.Args] struct{ a *Attempt[A] }

func (e execution[A]) SetProgress(_ context.Context, processed, total int64) error {
	a := e.a
	a.mu.Lock()
	if a.cancelled {
		a.mu.Unlock()
		return queue.ErrLeaseLost
	}
	a.processed, a.total = processed, total
	on := a.OnProgress
	a.mu.Unlock()
	if on != nil {
		on(processed, total)
	}
	return nil
}

func (e execution[A]) SetOutput(_ context.Context, output string) error {
	e.a.mu.Lock()
	defer e.a.mu.Unlock()
	if e.a.cancelled {
		return queue.ErrLeaseLost
	}
	e.a.output = json.RawMessage(output)
	return nil
}

func (e execution[A]) Jobs(_ context.Context, ids []int64, dest any) error {
	out, ok := dest.(*[]queue.JobRecord)
	if !ok {
		return fmt.Errorf("queuetest: %w: jobs into %T", queue.ErrInvalidOption, dest)
	}
	*out = nil
	for _, p := range e.a.Parents {
		if slices.Contains(ids, p.ID) {
			*out = append(*out, p)
		}
	}
	slices.SortFunc(*out, func(x, y queue.JobRecord) int { return cmp.Compare(x.ID, y.ID) })
	return nil
}

func (e execution[A]) CompleteTx(_ context.Context, tx *gorm.DB) error {
	if tx == nil {
		return fmt.Errorf("queuetest: %w: CompleteTx with a nil transaction", queue.ErrInvalidOption)
	}
	e.a.mu.Lock()
	defer e.a.mu.Unlock()
	if e.a.cancelled {
		return queue.ErrLeaseLost
	}
	e.a.completeTx = true
	return nil
}
