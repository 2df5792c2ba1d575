package batch_test

import (
	"context"

	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

func nop[T any]() batch.ProcessorFunc[T] {
	return func(context.Context, batch.Batch[T]) error { return nil }
}

func TestOptionValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  batch.Option
		want string
	}{
		{"max batch size zero", batch.WithMaxBatchSize(0), "max batch size 0 not in [1, 16777216]"},
		{"max batch size too big", batch.WithMaxBatchSize(batch.MaxBatchSizeLimit + 1), "max batch size 16777217 not in [1, 16777216]"},
		{"workers zero", batch.WithWorkers(0), "workers 0 not in [1, 4096]"},
		{"workers too many", batch.WithWorkers(batch.MaxWorkers + 1), "workers 4097 not in [1, 4096]"},
		{"negative queue", batch.WithQueueCapacity(-1), "queue capacity -1 not in [0, 1048576]"},
		{"queue too big", batch.WithQueueCapacity(batch.MaxQueueCapacity + 1), "queue capacity 1048577 not in [0, 1048576]"},
		{"nil cleanup", batch.WithCleanup(nil), "nil cleanup strategy"},
		{"zero cleanup timeout", batch.WithCleanupTimeout(0), "cleanup timeout 0s not positive"},
		{"nil option", nil, "nil Option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := batch.NewCoordinator(nop[int](), tc.opt)
			require.Nil(t, c)
			require.ErrorIs(t, err, batch.ErrInvalidOption)
			require.EqualError(t, err, "batch: invalid option: "+tc.want)
		})
	}
}

func TestNewCoordinatorRejectsNilProcessors(t *testing.T) {
	t.Parallel()
	_, err := batch.NewCoordinator[int](nil)
	require.ErrorIs(t, err, batch.ErrInvalidOption)
	_, err = batch.NewCoordinator(batch.ProcessorFunc[int](nil))
	require.ErrorIs(t, err, batch.ErrInvalidOption)
}

func TestValidOptionsAreAccepted(t *testing.T) {
	t.Parallel()
	c, err := batch.NewCoordinator(nop[int](),
		batch.WithMaxBatchSize(batch.MaxBatchSizeLimit), batch.WithWorkers(batch.MaxWorkers),
		batch.WithQueueCapacity(0), batch.WithCleanup(cleanup.None()), batch.WithCleanupTimeout(time.Millisecond),
		batch.WithLogger(nil), batch.WithObserver(nil))
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(context.Background()), "shutting down a coordinator never started")
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := batch.NewCoordinator(nop[int](), quiet())
	require.NoError(t, err)
	require.ErrorIs(t, c.Send(ctx, batch.Data("A", 1)), batch.ErrNotStarted)
	require.ErrorIs(t, c.SendMany(ctx, "A", []int{1}), batch.ErrNotStarted)

	require.NoError(t, c.Start(ctx))
	require.ErrorIs(t, c.Start(ctx), batch.ErrStarted)
	require.NoError(t, c.Send(ctx, batch.Data("A", 1)))

	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, c.Shutdown(ctx), "idempotent")
	require.ErrorIs(t, c.Send(ctx, batch.Data("A", 1)), batch.ErrClosed)
	require.ErrorIs(t, c.Send(ctx, batch.End[int]("A")), batch.ErrClosed)
	require.ErrorIs(t, c.SendMany(ctx, "A", []int{1}), batch.ErrClosed)
	require.ErrorIs(t, c.SendMany(ctx, "A", nil), batch.ErrClosed)
	require.ErrorIs(t, c.Start(ctx), batch.ErrClosed, "no restart after shutdown")
}

func TestShutdownBeforeStartPreventsStart(t *testing.T) {
	t.Parallel()
	c, err := batch.NewCoordinator(nop[int](), quiet())
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(context.Background()))
	require.ErrorIs(t, c.Start(context.Background()), batch.ErrClosed)
	require.ErrorIs(t, c.Send(context.Background(), batch.Data("A", 1)), batch.ErrClosed)
	<-c.Done() // closed: nothing will ever run
}

func TestConcurrentShutdowns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(3))
	b.send(t, "A", orders(0, 10), true)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = b.c.Shutdown(context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, batch.Completed, b.outs.one(t, "A").Status, "exactly one outcome despite eight shutdowns")
}

// Shutdown finishes what was sent, including sub-batches still queued.
func TestShutdownDrainsQueuedWork(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(10), batch.WithWorkers(1), batch.WithQueueCapacity(1000))
	for i := range 20 {
		b.send(t, string(rune('A'+i)), orders(0, 95), true)
	}
	b.shutdown(t)
	require.Equal(t, 20, b.outs.count())
	s := b.c.Stats()
	require.Equal(t, int64(20), s.BatchesCompleted)
	require.Equal(t, int64(20*95), s.ItemsProcessed)
	require.Zero(t, s.InFlight)
}

// A batch whose end never arrives is cleaned up and reported Incomplete.
func TestIncompleteAtShutdown(t *testing.T) {
	t.Parallel()
	processed := make(chan struct{}, 2)
	b := setup(t, func(r *recorder, _ *strategy) {
		r.process = func(_ context.Context, b batch.Batch[order]) error {
			if b.ID == "open" {
				processed <- struct{}{}
			}
			return nil
		}
	}, batch.WithMaxBatchSize(10))
	b.send(t, "open", orders(0, 25), false) // two sub-batches processed, five buffered
	<-processed
	<-processed
	b.send(t, "tiny", orders(0, 3), false) // never reached a worker
	b.send(t, "done", orders(0, 3), true)
	b.shutdown(t)

	o := b.outs.one(t, "open")
	require.Equal(t, batch.Incomplete, o.Status)
	require.ErrorIs(t, o.Err, batch.ErrIncomplete)
	require.Equal(t, cleanup.SeqIncomplete, o.Seq)
	require.Equal(t, 2, o.SubBatches)
	require.Equal(t, int64(20), o.Items)
	require.Contains(t, b.strat.Calls(), "cleanup open 0", "what it wrote is removed")

	tiny := b.outs.one(t, "tiny")
	require.Equal(t, batch.Incomplete, tiny.Status)
	require.NotContains(t, b.strat.Calls(), "cleanup tiny 0", "nothing was written, so no cleanup")
	require.Equal(t, batch.Completed, b.outs.one(t, "done").Status)
	require.Equal(t, int64(5+3), b.c.Stats().ItemsDiscarded)
}

// A hard stop is one rule, whichever way it comes: Shutdown's context ending,
// or Start's. Work in flight is cancelled; every batch without an outcome
// ends Incomplete, wrapping ErrStopped, and is cleaned up if it wrote
// anything; sends fail with ErrClosed; Done is closed once the workers have
// unwound, with no Shutdown needed after Start's context ends.
func TestHardStop(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"shutdown deadline", "start context"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				startCtx, cancelStart := context.WithCancel(context.Background())
				defer cancelStart()
				inProcess := make(chan struct{})
				rec := newRecorder()
				rec.process = func(ctx context.Context, b batch.Batch[order]) error {
					if b.ID == "slow" {
						close(inProcess)
						<-ctx.Done() // a long write that honours its context
						return ctx.Err()
					}
					return nil
				}
				strat := &strategy{failComplete: map[string]bool{}}
				outs := &outcomes{byID: map[string][]batch.Outcome{}}
				c, err := batch.NewCoordinator[order](rec, quiet(), batch.WithCleanup(strat), batch.WithObserver(outs.add),
					batch.WithMaxBatchSize(5), batch.WithWorkers(1), batch.WithQueueCapacity(100))
				require.NoError(t, err)
				require.NoError(t, c.Start(startCtx))
				bg := context.Background()
				require.NoError(t, c.SendMany(bg, "open", orders(0, 6))) // sub-batch 1 is written, 1 item waits; no end
				require.NoError(t, c.SendMany(bg, "slow", orders(0, 12)))
				require.NoError(t, c.Send(bg, batch.End[order]("slow")))
				require.NoError(t, c.SendMany(bg, "queued", orders(0, 2)))
				require.NoError(t, c.Send(bg, batch.End[order]("queued")))
				<-inProcess

				if how == "shutdown deadline" {
					ctx, cancel := context.WithTimeout(bg, 5*time.Second)
					defer cancel()
					start := time.Now()
					err := c.Shutdown(ctx)
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.EqualError(t, err, "batch: shutdown: context deadline exceeded")
					require.Equal(t, 5*time.Second, time.Since(start), "returns at the deadline, not later")
				} else {
					cancelStart()
				}
				<-c.Done()

				for _, id := range []string{"open", "slow", "queued"} {
					o := outs.one(t, id)
					require.Equal(t, batch.Incomplete, o.Status, id)
					require.ErrorIs(t, o.Err, batch.ErrStopped, id)
					require.Equal(t, cleanup.SeqIncomplete, o.Seq, id)
				}
				require.ErrorIs(t, outs.one(t, "open").Err, batch.ErrIncomplete, "and it never got its end")
				var pe *batch.ProcessError
				require.ErrorAs(t, outs.one(t, "slow").Err, &pe, "cut short mid-Process")
				require.ErrorIs(t, outs.one(t, "slow").Err, context.Canceled)
				require.ElementsMatch(t, []string{"cleanup open 0", "cleanup slow 0"}, strat.Calls(),
					"what wrote something is cleaned up; queued never began")
				require.Equal(t, []error{nil, nil}, strat.ctxErrs, "cleanup runs with a live context")
				for _, id := range []string{"open", "slow"} {
					require.NoError(t, outs.one(t, id).CleanupErr)
				}

				require.ErrorIs(t, c.Send(bg, batch.Data("new", order{})), batch.ErrClosed)
				require.ErrorIs(t, c.SendMany(bg, "new", orders(0, 1)), batch.ErrClosed)
				require.ErrorIs(t, c.Consume(bg, make(chan batch.Message[order])), batch.ErrClosed)
				s := c.Stats()
				require.Zero(t, s.InFlight)
				require.Equal(t, s.ItemsReceived, s.ItemsProcessed+s.ItemsDiscarded)
				require.NoError(t, c.Shutdown(bg), "a later Shutdown finds it stopped")
			})
		})
	}
}

// blockingSetup returns a coordinator with one worker, a queue of one and a
// sub-batch size of one, whose processor blocks until release is closed.
func blockingSetup(t *testing.T) (c *batch.Coordinator[int], release chan struct{}, outs *outcomes) {
	t.Helper()
	release = make(chan struct{})
	outs = &outcomes{byID: map[string][]batch.Outcome{}}
	p := batch.ProcessorFunc[int](func(context.Context, batch.Batch[int]) error { <-release; return nil })
	c, err := batch.NewCoordinator(p, quiet(), batch.WithWorkers(1), batch.WithQueueCapacity(1),
		batch.WithMaxBatchSize(1), batch.WithObserver(outs.add))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	return c, release, outs
}

func TestSendBlocksWhileTheQueueIsFullAndAbandonsOnContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, release, outs := blockingSetup(t)
		bg := context.Background()
		require.NoError(t, c.Send(bg, batch.Data("A", 1))) // fills the queue

		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		err := c.Send(ctx, batch.Data("A", 2))
		require.ErrorIs(t, err, context.DeadlineExceeded, "blocked by back-pressure, then abandoned")
		require.Equal(t, int64(1), c.Stats().ItemsReceived, "the abandoned item was not taken")

		sent := make(chan error, 1)
		go func() { sent <- c.Send(bg, batch.Data("A", 3)) }()
		synctest.Wait()
		select {
		case <-sent:
			t.Fatal("Send must block while the queue is full")
		default:
		}
		close(release)
		require.NoError(t, <-sent, "room frees up once the worker moves on")
		require.NoError(t, c.Send(bg, batch.End[int]("A")))
		require.NoError(t, c.Shutdown(bg))
		require.Equal(t, int64(2), outs.one(t, "A").Items)
	})
}

func TestShutdownReleasesBlockedSenders(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, release, outs := blockingSetup(t)
		bg := context.Background()
		require.NoError(t, c.Send(bg, batch.Data("A", 1)))
		sent := make(chan error, 1)
		go func() { sent <- c.SendMany(bg, "A", []int{2, 3}) }()
		synctest.Wait()

		done := make(chan error, 1)
		go func() { done <- c.Shutdown(bg) }()
		require.ErrorIs(t, <-sent, batch.ErrClosed, "a sender waiting for room is told, not left hanging")
		close(release)
		require.NoError(t, <-done)
		o := outs.one(t, "A")
		require.Equal(t, batch.Incomplete, o.Status)
		require.Equal(t, int64(1), o.Items)
		require.Equal(t, int64(1), c.Stats().ItemsReceived)
	})
}

func TestSendManyCopiesAndIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(4))
	items := orders(0, 10)
	require.NoError(t, b.c.SendMany(context.Background(), "A", items))
	for i := range items {
		items[i].ID = -1 // the caller reuses its slice
	}
	require.NoError(t, b.c.SendMany(context.Background(), "A", []order{}), "no items: nothing happens")
	require.NoError(t, b.c.SendMany(context.Background(), "empty", nil))
	b.send(t, "A", nil, true)
	b.shutdown(t)
	require.Equal(t, orders(0, 10), b.rec.Items("A"))
	require.Empty(t, b.outs.of("empty"), "sending no items opens no batch")
}

func TestLogsFailuresWithBatchIDAndNeverItems(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf []byte
	h := slogJSON(&mu, &buf)
	rec := newRecorder()
	rec.failAt["A"] = 1
	c, err := batch.NewCoordinator[order](rec, batch.WithLogger(h))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	require.NoError(t, c.Send(context.Background(), batch.Data("A", order{ID: 987654321})))
	require.NoError(t, c.Send(context.Background(), batch.End[order]("A")))
	require.NoError(t, c.Shutdown(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	logs := string(buf)
	require.Contains(t, logs, `"msg":"batch: failed"`)
	require.Contains(t, logs, `"batch_id":"A"`)
	require.Contains(t, logs, `"seq":1`)
	require.NotContains(t, logs, "987654321", "items are never logged")
}

// A second Shutdown with a context that is already done, on a coordinator that
// has stopped, reports success: it is idempotent whatever the context.
func TestShutdownAgainWithDoneContext(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.send(t, "A", orders(0, 3), true)
	b.shutdown(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		require.NoError(t, b.c.Shutdown(done))
	}
}

// Concurrent hard stops all report the deadline, and the workers unwind once.
func TestConcurrentHardStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		inProcess := make(chan struct{})
		b := setup(t, untilCancelled(inProcess, context.Context.Err))
		b.send(t, "A", orders(0, 3), true)
		<-inProcess
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				require.ErrorIs(t, b.c.Shutdown(ctx), context.DeadlineExceeded)
			})
		}
		wg.Wait()
		<-b.c.Done()
		require.Equal(t, batch.Incomplete, b.outs.one(t, "A").Status)
	})
}

// A processor that ignores its context delays the workers, not Shutdown:
// Shutdown returns at its deadline and Done closes when the processor returns.
func TestHardStopWithAProcessorThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		inProcess := make(chan struct{})
		b := setup(t, func(r *recorder, _ *strategy) {
			r.process = func(context.Context, batch.Batch[order]) error {
				close(inProcess)
				<-release // deaf to cancellation
				return nil
			}
		})
		b.send(t, "A", orders(0, 3), true)
		<-inProcess
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, b.c.Shutdown(ctx), context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start))
		select {
		case <-b.c.Done():
			t.Fatal("Done must wait for the processor")
		default:
		}
		close(release)
		<-b.c.Done()
		o := b.outs.one(t, "A")
		require.Equal(t, batch.Incomplete, o.Status, "the stop came before the batch could finish")
		require.Equal(t, 1, o.SubBatches)
		require.Contains(t, b.strat.Calls(), "cleanup A 0")
	})
}

// Every sender blocked on a full queue is released by room, and every one by
// Shutdown.
func TestManyBlockedSendersAreReleased(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, release, outs := blockingSetup(t)
		require.NoError(t, c.Send(context.Background(), batch.Data("A", 0)))
		results := make(chan error, 8)
		for i := range 8 {
			go func() { results <- c.Send(context.Background(), batch.Data(string(rune('B'+i)), i)) }()
		}
		synctest.Wait()
		require.Len(t, results, 0, "all eight wait for room")
		close(release)
		for range 8 {
			require.NoError(t, <-results)
		}
		require.NoError(t, c.Shutdown(context.Background()))
		require.Equal(t, int64(9), c.Stats().ItemsReceived)
		require.Equal(t, 9, len(outs.all), "nine batches, all incomplete: none got its end")
	})
}

// A Send that finds room succeeds even with a context already done: the
// context only bounds waiting.
func TestSendWithDoneContextAndRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, b.c.Send(done, batch.Data("A", order{})))
	require.NoError(t, b.c.Send(done, batch.End[order]("A")))
	b.shutdown(t)
	require.Equal(t, batch.Completed, b.outs.one(t, "A").Status)
}

// The cleanup strategy's context has a deadline (WithCleanupTimeout), and a
// hard stop does not cancel it.
func TestCleanupContextIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var deadline time.Duration
		strat := cleanup.Func(func(ctx context.Context, _ string, _ int) error {
			d, ok := ctx.Deadline()
			require.True(t, ok)
			deadline = time.Until(d)
			return nil
		})
		rec := newRecorder()
		rec.failAt["A"] = 1
		c, err := batch.NewCoordinator[order](rec, quiet(), batch.WithCleanup(strat), batch.WithCleanupTimeout(7*time.Second))
		require.NoError(t, err)
		require.NoError(t, c.Start(context.Background()))
		require.NoError(t, c.Send(context.Background(), batch.Data("A", order{})))
		require.NoError(t, c.Send(context.Background(), batch.End[order]("A")))
		require.NoError(t, c.Shutdown(context.Background()))
		require.Equal(t, 7*time.Second, deadline)
	})
}
