// Package batch is sheaf's batch engine: it groups the items producers send by
// batch ID, cuts each batch into sub-batches, and persists every sub-batch in
// its own transaction through a [Processor], on a pool of workers. When a
// sub-batch fails, a cleanup strategy removes what the batch's earlier
// sub-batches committed, so that a batch is all-or-nothing.
//
// It needs no database: the processor decides where items go. Package
// github.com/sheaf-dev/sheaf/batch/gormbatch provides processors and a cleanup
// strategy for any gorm model. The engine is built from three packages that
// never import it: accumulator (grouping by batch ID and splitting into
// sub-batches), worker (the keyed pool: per-key order, panics isolated) and
// cleanup (the cleanup contract and the strategies that need no database).
// None of the four imports gorm or a database driver, so only programs that
// import gormbatch or queue pull a database into their build.
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
// Cleanup runs with a context that a hard stop does not cancel, bounded by
// [WithCleanupTimeout], because cleanup is what keeps a stopped batch
// all-or-nothing. A hard stop may therefore take up to that bound longer
// before Done is closed: package gormbatch's cleanup, for one, waits for a
// database that is away within it.
//
// After Start's context has ended no Shutdown is needed; one returns nil
// once the workers have unwound. Shutdown is idempotent.
//
// # Hooks
//
// A processor that also implements [BeforeHook] or [AfterHook] gets
// BeforeBatch and AfterBatch called once per batch, around its sub-batches
// (also for a batch with no items). A hook's error fails the batch.
//
// # Options
//
//   - [WithMaxBatchSize]: the largest sub-batch, default
//     [DefaultMaxBatchSize], 1 to [MaxBatchSizeLimit].
//   - [WithWorkers]: batch IDs processed at once, default [DefaultWorkers];
//     size the database pool to match.
//   - [WithQueueCapacity]: sub-batches waiting for or held by workers before
//     Send blocks, default [DefaultQueueCapacityPerWorker] per worker. Memory
//     is about this many sub-batches, plus each open batch's unfilled tail.
//   - [WithCleanup]: what removes a failed batch's partial output, default
//     none (cleanup.None).
//   - [WithCleanupTimeout]: the bound on each Cleanup and MarkComplete call,
//     default [DefaultCleanupTimeout].
//   - [WithLogger]: default slog.Default; failures at Error and Warn,
//     lifecycle and batches at Debug; items are never logged.
//   - [WithObserver]: receives every [Outcome], from worker goroutines; each
//     call adds one.
//   - [WithSubBatchObserver]: receives each call to Process (sequence,
//     items, duration, error); each call adds one.
//   - [Options]: bundles options into one, as package otelbatch hands out.
//   - [WithBufferReuse]: reuses sub-batch memory, for processors that keep
//     no reference to Items.
//
// # Guarantees
//
//   - Every batch reports exactly one outcome; nothing is dropped without a
//     trace. ItemsReceived = ItemsProcessed + ItemsDiscarded once a
//     coordinator has shut down ([Stats]).
//   - A failed batch is cleaned up and never reported complete, also when
//     its cleanup fails (the outcome then carries CleanupErr).
//   - A batch's sub-batches run in order and never concurrently; one failing
//     batch does not stop the others.
//   - Panics in the processor, the hooks, the cleanup strategy or the
//     observer are recovered, with their stack, and handled as failures;
//     the workers survive. runtime.Goexit there (which t.FailNow and
//     testify's require call) is handled like a panic: the batch gets
//     exactly one outcome, Failed with a *[PanicError] wrapping [ErrGoexit]
//     (CleanupErr if it was the cleanup), its items are counted, and a new
//     goroutine takes the worker's place. A log handler that panics or calls
//     runtime.Goexit loses log lines, never an outcome.
//   - Send applies back-pressure: it blocks while the queue is full and
//     gives up when its context ends, in which case the message was not
//     taken. Consume waits for room before it receives, so a message it
//     takes from the channel is never held back by a full queue.
//   - A batch of any size streams through bounded memory: ten million items
//     under one batch ID peak at a few MiB of heap
//     (TestStreamingTenMillionItemsInBoundedMemory).
//
// # Limits
//
//   - The engine is in memory: a process that dies mid-batch leaves the
//     batch's committed sub-batches behind until something cleans them up.
//     Durable, retried, crash-recovered work is what package queue adds on
//     top.
//   - A batch is never retried by the engine; that is the producer's
//     decision.
//   - Processors must honour their context, or a hard stop waits for them.
//   - With several producers on one batch ID, their items interleave in the
//     order their sends took effect; each producer's own items keep their
//     order.
//
// # Calling back
//
// A processor, hook, cleanup strategy or observer must not call Send,
// SendMany or Shutdown on its own coordinator: each can wait for the very
// worker that calls it.
//
// # Design: no channel between Send and the workers
//
// Send appends straight into the accumulator under its mutex, with no
// channel and no consumer goroutine between producers and workers. A
// channel hand-off costs about 115 ns per item, and a consumer and a
// producer that park and wake each other per item held such a design to
// under half the rate of a bare channel; Send as it is keeps pace with one
// (see examples/BENCHMARKS.md). When a sub-batch fills, the accumulator hands it to
// the worker pool while still holding the lock, which keeps every batch's
// sub-batches in order, and Send blocks while the pool holds its limit of
// sub-batches. That limit is the queue capacity, counted in sub-batches
// because they are what holds memory.
//
// # Telemetry
//
// Package github.com/sheaf-dev/sheaf/batch/otelbatch reports the engine to
// OpenTelemetry, installed as one option; without it the engine does no
// telemetry work and imports no OpenTelemetry.
package batch
