// Package batch is sheaf's batch engine: it groups the items producers send by
// batch ID, cuts each batch into sub-batches, and persists every sub-batch in
// its own transaction through a [Processor], on a pool of workers. When a
// sub-batch fails, a cleanup strategy removes what the batch's earlier
// sub-batches committed, so that a batch is all-or-nothing.
//
// It needs no database: the processor decides where items go. Package
// github.com/sheaf-dev/sheaf/batch/gormbatch provides processors and a cleanup
// strategy for any gorm model.
//
// # Sending
//
// A producer sends items with [Data] messages and closes a batch with [End]:
//
//	c, err := batch.NewCoordinator(processor, batch.WithMaxBatchSize(1000))
//	...
//	c.Start(ctx)
//	for _, o := range orders {
//		c.Send(ctx, batch.Data("ORDER-2025-001", o))
//	}
//	c.Send(ctx, batch.End[Order]("ORDER-2025-001"))
//	...
//	c.Shutdown(ctx)
//
// [Coordinator.SendMany] sends a slice at once, which costs a few nanoseconds
// per item. [Coordinator.Consume] drains a channel of messages, for producers
// that already have one: it sends each message as Send does, until the
// channel's owner closes it. Messages are checked at the door: an empty batch
// ID or a nil item is refused with a *[MessageError] and nothing is sent.
//
// # Sub-batches and streaming
//
// A batch of n items becomes k = ceil(n/max) sub-batches numbered 1..k, of
// max items each except the last. A sub-batch goes to a worker the moment it is
// full, so a batch of any size streams through: memory holds at most the
// queue (see [WithQueueCapacity]) plus the unfilled tail of each open batch.
// A batch that ends with no items has no sub-batches; its hooks still run and
// it completes.
//
// # Order and parallelism
//
// The sub-batches of one batch ID run one at a time, in order, never on two
// workers at once. Different batch IDs run in parallel, up to [WithWorkers] at
// a time. Items of one producer keep their order; items of several producers
// for the same batch ID interleave in the order their sends took effect.
//
// # Failure and cleanup
//
// If a sub-batch's Process returns an error or panics, or a hook fails, the
// batch fails: its remaining sub-batches and later items are discarded, the
// cleanup strategy ([WithCleanup]) is called with the failed sequence number
// (cleanup.SeqUnknown for panics and hook failures), and the failure is
// reported. Other batches carry on. A call to runtime.Goexit in user code
// (testing's FailNow makes one) is handled like a panic, reported as a
// *[PanicError] wrapping [ErrGoexit]; it ends the worker's goroutine, and a
// new one takes its place. Nothing is retried: retrying is the
// producer's decision (or the job queue's, in package queue).
//
// # Outcomes
//
// Every batch ends in exactly one [Outcome], delivered to the observer set
// with [WithObserver]: Completed, Failed, or Incomplete (it could not finish
// because the coordinator shut down). Incomplete batches are cleaned up too.
// [Coordinator.Stats] returns counters at any time.
//
// # Reusing a batch ID
//
// An End closes the open batch of its ID. Items sent for that ID afterwards
// open a new batch, which runs after the earlier one has finished and gets its
// own outcome; an End with no open batch closes an empty batch. So a
// duplicate End completes an empty batch (its hooks and MarkComplete run
// again), and nothing is ever dropped. Cleanup strategies usually delete by
// batch ID, so when a later batch with a reused ID fails, its cleanup removes
// the earlier batch's rows too: give each logical batch its own ID.
//
// # Shutdown
//
// [Coordinator.Shutdown] refuses new sends, finishes every batch that got its
// End, cleans up and reports the others as Incomplete, and waits for the
// workers.
//
// A hard stop comes when Shutdown's context ends first, or when the context
// given to [Coordinator.Start] ends, and does the same either way: work in
// flight is cancelled, batches in flight end Incomplete wrapping [ErrStopped]
// and are cleaned up, sends fail with [ErrClosed], and [Coordinator.Done] is
// closed once the workers have unwound. Shutdown then returns an error
// wrapping its context's error at once.
//
// # Calling back
//
// A processor, hook, cleanup strategy or observer must not call Send,
// SendMany or Shutdown on its own coordinator: each can wait for the very
// worker that calls it.
package batch
