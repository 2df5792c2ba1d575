package batch

import (
	"fmt"
	"time"
)

// Status is how a batch ended.
type Status uint8

const (
	// Completed: every sub-batch, the hooks and MarkComplete succeeded.
	Completed Status = iota + 1
	// Failed: a sub-batch, a hook or MarkComplete failed, panicked or called
	// runtime.Goexit; the batch was cleaned up.
	Failed
	// Incomplete: the batch could not finish because the coordinator shut
	// down: its end-of-batch had not arrived, or a hard stop (Shutdown's
	// context or Start's ending) cut it short. It was cleaned up.
	Incomplete
)

func (s Status) String() string {
	switch s {
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Incomplete:
		return "incomplete"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Outcome is how one batch ended. The coordinator reports exactly one per
// batch to the observer set with [WithObserver].
type Outcome struct {
	BatchID string
	Status  Status
	// SubBatches and Items count the sub-batches that were processed
	// successfully and the items in them. For a failed or incomplete batch
	// they were cleaned up.
	SubBatches int
	Items      int64
	// Duration runs from the start of the batch's first step (the before
	// hook or first sub-batch) to its outcome; zero if no step ran.
	Duration time.Duration
	// Seq is the failed sequence number handed to the cleanup strategy: the
	// sub-batch whose Process returned an error, cleanup.SeqUnknown (-1) for
	// panics and hook failures, cleanup.SeqIncomplete (0) for incomplete
	// batches. Zero for completed batches.
	Seq int
	// Err is why the batch failed (a *ProcessError) or was incomplete
	// (ErrIncomplete; after a hard stop, an error wrapping ErrStopped, and
	// ErrIncomplete as well if the end had not arrived); nil when completed.
	Err error
	// CleanedUp reports whether the cleanup strategy's Cleanup was called
	// for the batch. It is false for completed batches, and for failed or
	// incomplete ones whose first step never ran, as nothing was written.
	CleanedUp bool
	// CleanupErr is the cleanup strategy's error. nil means cleanup
	// succeeded, or was not needed because nothing had been processed.
	CleanupErr error
}

// SubBatchResult is how one call to Process ended, as reported to the
// observers set with [WithSubBatchObserver].
type SubBatchResult struct {
	BatchID string
	// Seq is the sub-batch's 1-based position in its batch.
	Seq int
	// Items is the number of items handed to Process.
	Items int
	// Duration is how long Process took.
	Duration time.Duration
	// Err is nil if Process succeeded. Otherwise it is Process's error, or
	// a *PanicError for a panic or runtime.Goexit; the batch has failed.
	Err error
}

// Stats is a snapshot of a coordinator's counters. Each field is read
// atomically, but the fields are not read at one instant.
type Stats struct {
	// ItemsReceived counts items taken in by Send and SendMany.
	ItemsReceived int64
	// ItemsDiscarded counts items never processed because their batch failed
	// or could not finish.
	ItemsDiscarded int64
	// ItemsProcessed counts items in sub-batches processed successfully.
	ItemsProcessed int64
	// SubBatchesProcessed counts sub-batches processed successfully.
	SubBatchesProcessed int64
	// Batches by outcome.
	BatchesCompleted  int64
	BatchesFailed     int64
	BatchesIncomplete int64
	// Cleanups counts calls to the cleanup strategy's Cleanup;
	// CleanupFailures those that returned an error or panicked.
	Cleanups        int64
	CleanupFailures int64
	// InFlight counts batches that have received a message and have no
	// outcome yet.
	InFlight int64
	// Queued is the number of tasks (sub-batches and batch ends) waiting for
	// or held by a worker.
	Queued int
}
