package batch

import "context"

// Batch is one sub-batch: up to the maximum batch size of consecutive items
// of one batch, in the order they were sent.
type Batch[T any] struct {
	// ID is the batch ID the items were sent with.
	ID string
	// Seq is the sub-batch's 1-based position in its batch.
	Seq int
	// Offset is the number of items of the batch before this sub-batch, so
	// Items[i] is item Offset+i of the batch.
	Offset int64
	// Items holds at least one item. By default the processor owns the
	// slice: the coordinator neither reuses nor reads it after Process
	// returns. With WithBufferReuse(true) the coordinator reuses it instead,
	// and Process must not keep it.
	Items []T
}

// Processor persists one sub-batch. The coordinator calls Process for each
// sub-batch of a batch in order, never for two sub-batches of one batch ID at
// once, and for different batch IDs concurrently.
//
// Process should do all its work in one transaction: commit on success, roll
// back and return an error on failure. A returned error, a panic or a call to
// runtime.Goexit fails the whole batch: later sub-batches are skipped and the
// cleanup strategy removes what earlier ones committed.
//
// ctx is cancelled when the coordinator is stopped hard (see
// [Coordinator.Shutdown]); a processor must return promptly once it is.
type Processor[T any] interface {
	Process(ctx context.Context, b Batch[T]) error
}

// ProcessorFunc adapts a function to a [Processor].
type ProcessorFunc[T any] func(ctx context.Context, b Batch[T]) error

// Process calls f(ctx, b).
func (f ProcessorFunc[T]) Process(ctx context.Context, b Batch[T]) error { return f(ctx, b) }

// BeforeHook is implemented by processors that prepare for a batch. The
// coordinator calls BeforeBatch once per batch, before its first sub-batch
// (for a batch with no items, before AfterBatch). An error fails the batch.
type BeforeHook interface {
	BeforeBatch(ctx context.Context, batchID string) error
}

// AfterHook is implemented by processors that finish a batch. The coordinator
// calls AfterBatch once, after every sub-batch succeeded and before the
// cleanup strategy's MarkComplete. An error fails the batch, which is then
// cleaned up.
type AfterHook interface {
	AfterBatch(ctx context.Context, batchID string) error
}
