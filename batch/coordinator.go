package batch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sheaf-dev/sheaf/accumulator"
	"github.com/sheaf-dev/sheaf/worker"
)

// Coordinator groups the items sent to it by batch ID, cuts each batch into
// sub-batches and runs them on a pool of workers: the sub-batches of one batch
// ID in order on one worker at a time, different batch IDs in parallel. Create
// one with [NewCoordinator]; its methods are safe for concurrent use.
type Coordinator[T any] struct {
	proc   Processor[T]
	before BeforeHook
	after  AfterHook
	o      options
	log    *slog.Logger

	nilable bool // T can be nil; worked out once for Send's validation

	acc  *accumulator.Accumulator[T]
	pool *worker.Pool
	// runs holds the batches that have sub-batches in the pool and more to
	// come. It is touched only by the accumulator's sink functions, which
	// run under the accumulator's lock.
	runs map[uint64]*run[T]

	// Sends take nothing after Shutdown has sealed the accumulator, so no
	// count of senders in progress is needed: the accumulator's lock orders
	// every send before or after the seal.
	state      atomic.Int32  // lifecycle: created, started, closed
	closing    chan struct{} // closed when Shutdown begins; releases senders waiting for room
	lifecycle  sync.Mutex    // orders Start against Shutdown
	sealOnce   sync.Once
	cancelWork context.CancelFunc
	stopped    <-chan struct{} // Done of the work context; set by Start before state becomes started
	// unwatch stops the hard stop that Start arranges for the end of its
	// context; Shutdown calls it, as it seals the coordinator itself.
	unwatch func() bool
	// hardStop is the error of the Shutdown whose context ended before the
	// workers had finished, if one did: the Shutdowns waiting with it
	// return it too.
	hardStop atomic.Pointer[error]

	stats counters
}

const (
	created int32 = iota
	started
	closed
)

type counters struct {
	discarded,
	processed,
	subBatches,
	completed,
	failed,
	incomplete,
	cleanups,
	cleanupFailures atomic.Int64
}

// NewCoordinator returns a coordinator that hands sub-batches to p. It checks
// the options and returns an error wrapping [ErrInvalidOption] if one is out
// of range. It starts nothing: call [Coordinator.Start].
//
// If p also implements [BeforeHook] or [AfterHook], the hooks run around
// each batch.
func NewCoordinator[T any](p Processor[T], opts ...Option) (*Coordinator[T], error) {
	if p == nil {
		return nil, invalid("nil processor")
	}
	if f, ok := p.(ProcessorFunc[T]); ok && f == nil {
		return nil, invalid("nil ProcessorFunc")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("nil Option")
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	if o.queue == 0 {
		o.queue = DefaultQueueCapacityPerWorker * o.workers
	}
	c := &Coordinator[T]{
		proc:    p,
		o:       o,
		log:     o.logger,
		nilable: nilable[T](),
		runs:    make(map[uint64]*run[T]),
		closing: make(chan struct{}),
		// cancelWork and unwatch are replaced by Start; these let Shutdown
		// call them unconditionally.
		cancelWork: func() {},
		unwatch:    func() bool { return false },
	}
	c.pool = worker.New(o.workers, o.queue, c.internalPanic)
	c.before, _ = p.(BeforeHook)
	c.after, _ = p.(AfterHook)
	c.acc = accumulator.New(o.maxBatchSize, accumulator.Sink[T]{SubBatch: c.queueSubBatch, Closed: c.queueEnd})
	return c, nil
}

// Start starts the workers. ctx is the parent of the context handed to the
// processor, the hooks and the cleanup strategy.
//
// Cancelling ctx is a hard stop, doing what Shutdown does when its context
// ends: work in flight is cancelled, batches in flight end Incomplete
// wrapping [ErrStopped] and are cleaned up, sends fail with [ErrClosed], and
// [Coordinator.Done] is closed once the workers have unwound. Shutdown is not
// needed after it, and returns nil once the workers have unwound.
//
// Start returns [ErrStarted] if called twice and [ErrClosed] after Shutdown.
func (c *Coordinator[T]) Start(ctx context.Context) error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	switch c.state.Load() {
	case started:
		return ErrStarted
	case closed:
		return ErrClosed
	}
	work, cancel := context.WithCancel(ctx)
	c.cancelWork, c.stopped = cancel, work.Done()
	c.pool.Start(work)
	// Only the end of ctx itself starts this: Shutdown unwatches before it
	// cancels work.
	c.unwatch = context.AfterFunc(work, c.seal)
	c.state.Store(started)
	c.logSafely(slog.LevelDebug, "batch: coordinator started",
		"workers", c.o.workers, "max_batch_size", c.o.maxBatchSize, "queue_capacity", c.o.queue)
	return nil
}

// Send sends one message: an item for a batch, or the end of a batch. It
// returns once the message is taken in; that is quick unless the queue of
// sub-batches waiting for a worker is full, in which case Send blocks until
// there is room, which is how slow processing slows producers down. If ctx
// ends while Send waits, Send returns ctx.Err() and the message is not sent;
// a Send that finds room does not look at ctx.
//
// Send returns a *[MessageError] for an invalid message, [ErrNotStarted]
// before Start, and [ErrClosed] once Shutdown has begun.
//
// A processor must not Send to its own coordinator: when the queue is full it
// would wait for itself.
func (c *Coordinator[T]) Send(ctx context.Context, m Message[T]) error {
	if err := m.validate(c.nilable); err != nil {
		return err
	}
	if err := c.waitRoom(ctx); err != nil {
		return err
	}
	if !c.put(m) {
		return ErrClosed
	}
	return nil
}

// Consume sends the messages it receives from in, one by one and in order,
// each as [Coordinator.Send] would: the same checks, the same back-pressure
// (Consume waits for room before it receives, so that a message it takes
// from in is never held back by a full queue). It returns nil once in is
// closed and every message received has been taken in. The caller owns in
// and closes it when done; Consume never closes it, and returns at the first
// of these:
//
//   - ctx ends, while Consume waits for a message or for room: an error
//     wrapping ctx.Err(). Nothing had been received and not sent.
//   - A message is invalid: its *[MessageError]. That message is not sent,
//     as with Send, and the messages after it are left in the channel;
//     calling Consume again carries on after it.
//   - The coordinator shuts down (Shutdown, or Start's context ending):
//     [ErrClosed], also while Consume waits for a message. A message that
//     Consume had received at that moment is not sent, as a Send of it
//     would not be; the error says which.
//   - Before Start: [ErrNotStarted], having received nothing.
//
// Consume calls may run at the same time, on one channel or on several, and
// alongside Send. Like the sends of several producers, the messages of one
// batch taken by different Consume calls interleave in the order their sends
// took effect, so consume a channel with one call to keep its order. As with
// Send, a processor must not Consume into its own coordinator.
func (c *Coordinator[T]) Consume(ctx context.Context, in <-chan Message[T]) error {
	done := ctx.Done()
	cancelled := func() error { return fmt.Errorf("batch: consume: %w", ctx.Err()) }
	for {
		if err := c.waitRoom(ctx); err != nil {
			if err == ctx.Err() {
				return cancelled()
			}
			return err
		}
		// A done context wins over a message that is ready, so that Consume
		// stops when told and not at a random later message.
		select {
		case <-done:
			return cancelled()
		default:
		}
		var m Message[T]
		var open bool
		select {
		case m, open = <-in: // no select over four channels while messages wait
		default:
			select {
			case m, open = <-in:
			case <-done:
				return cancelled()
			case <-c.closing:
				return ErrClosed
			case <-c.stopped:
				return ErrClosed
			}
		}
		if !open {
			return nil
		}
		if err := m.validate(c.nilable); err != nil {
			return err
		}
		if !c.put(m) {
			return fmt.Errorf("batch: consume: %v received but not sent: %w", m, ErrClosed)
		}
	}
}

// put hands m to the accumulator, and reports false once it is sealed.
func (c *Coordinator[T]) put(m Message[T]) bool {
	if m.kind == kindEnd {
		return c.acc.Close(m.batchID)
	}
	return c.acc.Add(m.batchID, m.item)
}

// SendMany sends every item of items as data for batchID: the cheap way to
// send many items. It is all or nothing: it waits for room once, like Send,
// and then takes in every item, in order and without items of other calls in
// between, so a large slice may briefly hold the queue above its capacity
// (by at most the size of the slice). It keeps no reference to items: the
// caller may reuse the slice when SendMany returns. Sending no items does
// nothing. Errors are as for [Coordinator.Send]; a nil item is reported with
// its index and nothing is sent.
func (c *Coordinator[T]) SendMany(ctx context.Context, batchID string, items []T) error {
	if batchID == "" {
		return &MessageError{Reason: "empty batch ID"}
	}
	if c.nilable {
		for i := range items {
			if isNil(items[i]) {
				return &MessageError{BatchID: batchID, Reason: fmt.Sprintf("nil item at index %d", i)}
			}
		}
	}
	if err := c.waitRoom(ctx); err != nil {
		return err
	}
	if len(items) > 0 && !c.acc.AddMany(batchID, items) {
		return ErrClosed
	}
	return nil
}

// waitRoom checks the lifecycle and waits while the queue is full.
func (c *Coordinator[T]) waitRoom(ctx context.Context) error {
	switch c.state.Load() {
	case created:
		return ErrNotStarted
	case closed:
		return ErrClosed
	}
	select {
	case <-c.stopped: // Start's context ended: nothing sent now could finish
		return ErrClosed
	default:
	}
	if !c.pool.Full() {
		return nil
	}
	select {
	case <-c.pool.Room():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return ErrClosed
	case <-c.stopped:
		return ErrClosed
	}
}

// Shutdown stops the coordinator gracefully: Send, SendMany and Consume fail
// with ErrClosed from now on (those waiting included), every batch that
// received its end-of-batch is finished, and every batch that did not is
// cleaned up and reported Incomplete. Shutdown returns nil once all of that is
// done and every worker has exited.
//
// If ctx ends first, Shutdown stops hard, as cancelling Start's context
// does: work in flight is cancelled, batches in flight end Incomplete
// wrapping [ErrStopped] and are cleaned up (with a context a hard stop does
// not cancel, bounded by [WithCleanupTimeout]), sends fail with [ErrClosed],
// and [Coordinator.Done] is closed once the workers have unwound. Shutdown
// returns an error wrapping ctx.Err() at once; wait for Done before relying
// on every outcome having been delivered.
//
// Shutdown is idempotent and safe to call concurrently, and before Start (it
// then only stops the coordinator from starting). It must not be called from
// the processor, a hook, the cleanup strategy or the observer. Calls that
// wait together report the same stop: if one's ctx ends, and stops the
// coordinator hard, every call waiting with it returns its error.
func (c *Coordinator[T]) Shutdown(ctx context.Context) error {
	c.lifecycle.Lock()
	prev := c.state.Swap(closed)
	if prev != closed {
		close(c.closing)
	}
	c.lifecycle.Unlock()
	c.unwatch()
	c.seal()
	if prev == created {
		return nil
	}
	select { // a coordinator already stopped returns nil even for a done ctx
	case <-c.pool.Done():
		c.stoppedCleanly()
		return nil
	default:
	}
	select {
	case <-c.pool.Done():
		if err := c.hardStop.Load(); err != nil {
			// A concurrent Shutdown's context ended as this one waited:
			// the stop was hard, not graceful, whatever this ctx says.
			return *err
		}
		c.stoppedCleanly()
		return nil
	case <-ctx.Done():
	}
	err := fmt.Errorf("batch: shutdown: %w", ctx.Err())
	c.hardStop.CompareAndSwap(nil, &err)
	c.cancelWork()
	c.logSafely(slog.LevelWarn, "batch: shutdown deadline passed; in-flight work cancelled", "err", ctx.Err())
	return err
}

// seal refuses sends from now on, lets go of the batches without their end,
// and lets the workers finish what they hold and exit: the start of every
// stop, hard or graceful. Only its first call does anything; a second waits
// for the first.
func (c *Coordinator[T]) seal() {
	c.sealOnce.Do(func() {
		// After the seal no send takes anything, so the pool gets no more
		// tasks and can be closed.
		n := c.acc.Abandon()
		c.pool.Close()
		c.logSafely(slog.LevelDebug, "batch: sealed; no more sends", "batches_without_end", n)
	})
}

func (c *Coordinator[T]) stoppedCleanly() {
	c.cancelWork()
	c.logSafely(slog.LevelDebug, "batch: shutdown complete")
}

// Done returns a channel that is closed when the workers have exited after
// Shutdown or the end of Start's context, and every outcome has been
// delivered. It is closed already if Shutdown was called before Start.
func (c *Coordinator[T]) Done() <-chan struct{} { return c.pool.Done() }

// Stats returns a snapshot of the coordinator's counters.
func (c *Coordinator[T]) Stats() Stats {
	s := Stats{
		ItemsReceived:       c.acc.Received(),
		ItemsDiscarded:      c.stats.discarded.Load(),
		ItemsProcessed:      c.stats.processed.Load(),
		SubBatchesProcessed: c.stats.subBatches.Load(),
		BatchesCompleted:    c.stats.completed.Load(),
		BatchesFailed:       c.stats.failed.Load(),
		BatchesIncomplete:   c.stats.incomplete.Load(),
		Cleanups:            c.stats.cleanups.Load(),
		CleanupFailures:     c.stats.cleanupFailures.Load(),
		Queued:              c.pool.Held(),
	}
	s.InFlight = int64(c.acc.Opened()) - s.BatchesCompleted - s.BatchesFailed - s.BatchesIncomplete
	return s
}

// queueSubBatch is the accumulator's sink for sub-batches. It runs under the
// accumulator's lock, which is what keeps each batch's tasks in order.
func (c *Coordinator[T]) queueSubBatch(sb accumulator.SubBatch[T]) {
	r := c.runs[sb.Gen]
	if r == nil {
		r = &run[T]{id: sb.BatchID, gen: sb.Gen}
		c.runs[sb.Gen] = r
	}
	c.submit(r, func(ctx context.Context) { c.process(ctx, r, sb) })
}

// queueEnd is the accumulator's sink for batches it lets go of: after the
// last sub-batch, the batch is finished, or abandoned if its end-of-batch
// never came.
func (c *Coordinator[T]) queueEnd(sum accumulator.Summary) {
	r := c.runs[sum.Gen]
	if r == nil {
		r = &run[T]{id: sum.BatchID, gen: sum.Gen}
	}
	delete(c.runs, sum.Gen)
	// Items the accumulator dropped: after a failure, or buffered when the
	// batch was abandoned. Sub-batches skipped by their task count there.
	c.stats.discarded.Add(sum.Discarded + int64(sum.Buffered))
	if !sum.Ended {
		// Its queued sub-batches would only be written to be cleaned up.
		r.abandoned.Store(true)
	}
	if sum.Ended {
		c.submit(r, func(ctx context.Context) { c.finish(ctx, r) })
	} else {
		c.submit(r, func(ctx context.Context) { c.abandon(ctx, r) })
	}
}

func (c *Coordinator[T]) submit(r *run[T], t worker.Task) {
	// The pool is closed only by Shutdown after every sender has left and
	// Abandon has run, so a submission cannot find it closed.
	if err := c.pool.Submit(r.id, t); err != nil {
		panic("batch: internal error: " + err.Error())
	}
}

func (c *Coordinator[T]) internalPanic(key string, err *PanicError) {
	if err.Value == worker.ErrGoexit {
		// Only user code calls Goexit, and it runs under worker.Try: the
		// batch has its outcome, and the pool has replaced the goroutine.
		c.logSafely(slog.LevelDebug, "batch: worker replaced after runtime.Goexit in user code", "batch_id", key)
		return
	}
	c.logSafely(slog.LevelError, "batch: internal panic", "batch_id", key, "err", err, "stack", string(err.Stack))
}
