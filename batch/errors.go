package batch

import (
	"errors"
	"fmt"

	"github.com/sheaf-dev/sheaf/worker"
)

var (
	// ErrClosed is returned by Send, SendMany and Consume once Shutdown has
	// begun or Start's context has ended, and by Start after Shutdown.
	ErrClosed = errors.New("batch: coordinator is shut down")
	// ErrNotStarted is returned by Send, SendMany and Consume before Start.
	ErrNotStarted = errors.New("batch: coordinator not started")
	// ErrStarted is returned by Start when the coordinator was already
	// started.
	ErrStarted = errors.New("batch: coordinator already started")
	// ErrInvalidMessage is matched by every *MessageError.
	ErrInvalidMessage = errors.New("batch: invalid message")
	// ErrInvalidOption is wrapped by NewCoordinator's errors about options
	// and arguments.
	ErrInvalidOption = errors.New("batch: invalid option")
	// ErrIncomplete is the Err of an [Outcome] whose end-of-batch message had
	// not arrived when the coordinator shut down; after a hard stop the Err
	// wraps it, and ErrStopped too.
	ErrIncomplete = errors.New("batch: end-of-batch not received before shutdown")
	// ErrStopped is wrapped by the Err of an [Outcome] that a hard stop (a
	// Shutdown deadline, or Start's context ending) kept from finishing.
	ErrStopped = errors.New("batch: stopped before the batch finished")
)

// MessageError reports a message that Send refused. Nothing was sent.
type MessageError struct {
	BatchID string // empty when the batch ID itself is the problem
	Reason  string
}

func (e *MessageError) Error() string {
	if e.BatchID == "" {
		return "batch: invalid message: " + e.Reason
	}
	return fmt.Sprintf("batch: invalid message for %q: %s", e.BatchID, e.Reason)
}

// Unwrap returns ErrInvalidMessage, so errors.Is(err, ErrInvalidMessage) holds.
func (e *MessageError) Unwrap() error { return ErrInvalidMessage }

// ProcessError is the error of a failed batch: which batch, which step, which
// sub-batch, and the cause.
type ProcessError struct {
	BatchID string
	// Op is the step that failed: "before", "process", "after" or
	// "complete" (the cleanup strategy's MarkComplete).
	Op string
	// Seq is the sub-batch being processed when Op is "process"; 0 otherwise.
	Seq int
	// Err is the cause. A panic arrives as a *PanicError.
	Err error
}

func (e *ProcessError) Error() string {
	if e.Op == "process" {
		return fmt.Sprintf("batch %q: sub-batch %d: %v", e.BatchID, e.Seq, e.Err)
	}
	return fmt.Sprintf("batch %q: %s: %v", e.BatchID, e.Op, e.Err)
}

func (e *ProcessError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from a processor, hook, cleanup strategy or
// observer, with the stack of the goroutine that panicked. A call to
// runtime.Goexit there (as testing's FailNow makes) is reported as one too,
// with [ErrGoexit] as its Value.
type PanicError = worker.PanicError

// ErrGoexit is the Value of the *[PanicError] that reports a call to
// runtime.Goexit in user code; errors.Is finds it in an Outcome's errors.
var ErrGoexit = worker.ErrGoexit
