package batch_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// Spec 10.1: 100 items, max 5000 → one sub-batch, hooks, MarkComplete.
func TestExample1SimpleBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.send(t, "ORDER-001", orders(0, 100), true)
	b.shutdown(t)

	require.Equal(t, []string{"before ORDER-001", "process ORDER-001 1 n=100", "after ORDER-001"}, b.rec.Events())
	require.Equal(t, []string{"complete ORDER-001"}, b.strat.Calls())
	require.Equal(t, orders(0, 100), b.rec.Items("ORDER-001"))
	o := b.outs.one(t, "ORDER-001")
	require.Equal(t, batch.Completed, o.Status)
	require.Equal(t, 1, o.SubBatches)
	require.Equal(t, int64(100), o.Items)
	require.NoError(t, o.Err)
}

// Spec 10.2: 10,000 items with the default max of 5000 → two sub-batches.
func TestExample2SplitBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.c.SendMany(context.Background(), "ORDER-002", orders(0, 10_000)))
	b.send(t, "ORDER-002", nil, true)
	b.shutdown(t)

	require.Equal(t, []string{
		"before ORDER-002", "process ORDER-002 1 n=5000", "process ORDER-002 2 n=5000", "after ORDER-002",
	}, b.rec.Events())
	require.Equal(t, []string{"complete ORDER-002"}, b.strat.Calls())
	require.Equal(t, orders(0, 10_000), b.rec.Items("ORDER-002"))
	o := b.outs.one(t, "ORDER-002")
	require.Equal(t, batch.Completed, o.Status)
	require.Equal(t, 2, o.SubBatches)
	require.Equal(t, int64(10_000), o.Items)
}

// Spec 10.3: sub-batch 2 fails → cleanup(id, 2), no after hook, no
// MarkComplete, failure reported with its sequence.
func TestExample3FailureWithCleanup(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failAt["ORDER-003"] = 2 })
	require.NoError(t, b.c.SendMany(context.Background(), "ORDER-003", orders(0, 10_000)))
	b.send(t, "ORDER-003", nil, true)
	b.shutdown(t)

	require.Equal(t, []string{
		"before ORDER-003", "process ORDER-003 1 n=5000", "process ORDER-003 2 n=5000",
	}, b.rec.Events())
	require.Equal(t, []string{"cleanup ORDER-003 2"}, b.strat.Calls())
	o := b.outs.one(t, "ORDER-003")
	require.Equal(t, batch.Failed, o.Status)
	require.Equal(t, 2, o.Seq)
	require.Equal(t, 1, o.SubBatches, "sub-batch 1 had been processed, and was cleaned up")
	require.NoError(t, o.CleanupErr)
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, batch.ProcessError{BatchID: "ORDER-003", Op: "process", Seq: 2, Err: errConstraint}, *pe)
	require.ErrorIs(t, o.Err, errConstraint)
	require.Equal(t, `batch "ORDER-003": sub-batch 2: `+errConstraint.Error(), o.Err.Error())
}

// Spec 10.4: three interleaved batch IDs run in parallel. Each Process waits
// until all three have started, which only finishes if they run at once;
// otherwise the bubble deadlocks and synctest fails the test.
func TestExample4ParallelBatchIDs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var started sync.WaitGroup
		started.Add(3)
		b := setup(t, func(r *recorder, _ *strategy) {
			r.process = func(context.Context, batch.Batch[order]) error {
				started.Done()
				started.Wait()
				return nil
			}
		}, batch.WithWorkers(4))
		ids := []string{"ORDER-001", "ORDER-002", "ORDER-003"}
		for i := range 500 {
			for k, id := range ids {
				b.send(t, id, []order{{ID: k*1000 + i}}, false)
			}
		}
		for _, id := range ids {
			b.send(t, id, nil, true)
		}
		b.shutdown(t)
		for k, id := range ids {
			o := b.outs.one(t, id)
			require.Equal(t, batch.Completed, o.Status)
			require.Equal(t, 1, o.SubBatches)
			require.Equal(t, int64(500), o.Items)
			require.Equal(t, orders(k*1000, 500)[0].ID, b.rec.Items(id)[0].ID)
		}
	})
}

func TestEdgeSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		n     int
		sizes []string
	}{
		{"zero items", 0, nil},
		{"one item", 1, []string{"process A 1 n=1"}},
		{"exactly max", 10, []string{"process A 1 n=10"}},
		{"max plus one", 11, []string{"process A 1 n=10", "process A 2 n=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, batch.WithMaxBatchSize(10))
			b.send(t, "A", orders(0, tc.n), true)
			b.shutdown(t)
			want := append([]string{"before A"}, tc.sizes...)
			require.Equal(t, append(want, "after A"), b.rec.Events(), "hooks run even for an empty batch")
			o := b.outs.one(t, "A")
			require.Equal(t, batch.Completed, o.Status)
			require.Equal(t, len(tc.sizes), o.SubBatches)
			require.Equal(t, int64(tc.n), o.Items)
		})
	}
}

func TestAFailingBatchDoesNotStopTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failAt["bad"] = 1 }, batch.WithMaxBatchSize(10))
	for i := range 30 {
		b.send(t, "bad", orders(i, 1), false)
		b.send(t, "good", orders(i, 1), false)
	}
	b.send(t, "bad", nil, true)
	b.send(t, "good", nil, true)
	b.shutdown(t)
	require.Equal(t, batch.Failed, b.outs.one(t, "bad").Status)
	good := b.outs.one(t, "good")
	require.Equal(t, batch.Completed, good.Status)
	require.Equal(t, int64(30), good.Items)
	require.Equal(t, orders(0, 30), b.rec.Items("good"))
}

func TestItemsAfterAFailureAreDiscarded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failAt["A"] = 1 }, batch.WithMaxBatchSize(10))
	b.send(t, "A", orders(0, 100), true)
	b.shutdown(t)
	for _, e := range b.rec.Events() {
		require.NotContains(t, e, "process A 2", "sub-batches after the failed one never run")
	}
	require.Equal(t, []string{"cleanup A 1"}, b.strat.Calls(), "cleanup runs once")
	s := b.c.Stats()
	require.Equal(t, int64(100), s.ItemsReceived)
	require.Equal(t, int64(100), s.ItemsDiscarded, "every item of the failed batch is accounted for")
	require.Zero(t, s.ItemsProcessed)
	require.Equal(t, int64(1), s.BatchesFailed)
}

// A panic is an unexpected error: cleanup gets -1, as the specification says.
func TestProcessorPanic(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.panicAt["A"] = 2 }, batch.WithMaxBatchSize(5))
	b.send(t, "A", orders(0, 12), true)
	b.send(t, "B", orders(0, 3), true)
	b.shutdown(t)
	o := b.outs.one(t, "A")
	require.Equal(t, batch.Failed, o.Status)
	require.Equal(t, cleanup.SeqUnknown, o.Seq)
	var pe *batch.PanicError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "processor exploded on A", pe.Value)
	require.Contains(t, string(pe.Stack), "helpers_test.go")
	var perr *batch.ProcessError
	require.ErrorAs(t, o.Err, &perr)
	require.Equal(t, 2, perr.Seq, "the error still says which sub-batch panicked")
	require.Contains(t, b.strat.Calls(), "cleanup A -1")
	require.Equal(t, batch.Completed, b.outs.one(t, "B").Status, "the worker survives")
}

func TestBeforeHookFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failBefore["A"] = true })
	b.send(t, "A", orders(0, 3), true)
	b.shutdown(t)
	require.Equal(t, []string{"before A"}, b.rec.Events(), "no sub-batch runs after a failed before hook")
	require.Equal(t, []string{"cleanup A -1"}, b.strat.Calls())
	o := b.outs.one(t, "A")
	require.Equal(t, batch.Failed, o.Status)
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "before", pe.Op)
	require.Contains(t, o.Err.Error(), `batch "A": before: before hook refused A`)
}

func TestAfterHookFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failAfter["A"] = true })
	b.send(t, "A", orders(0, 3), true)
	b.shutdown(t)
	require.Equal(t, []string{"cleanup A -1"}, b.strat.Calls(), "no MarkComplete, and the written data is cleaned up")
	o := b.outs.one(t, "A")
	require.Equal(t, batch.Failed, o.Status)
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "after", pe.Op)
}

func TestMarkCompleteFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ *recorder, s *strategy) { s.failComplete["A"] = true })
	b.send(t, "A", orders(0, 3), true)
	b.shutdown(t)
	require.Equal(t, []string{"complete A", "cleanup A -1"}, b.strat.Calls())
	o := b.outs.one(t, "A")
	require.Equal(t, batch.Failed, o.Status, "a batch whose completion cannot be recorded is not complete")
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "complete", pe.Op)
}

func TestCleanupFailureIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, s *strategy) { r.failAt["A"] = 1; s.failCleanup = true })
	b.send(t, "A", orders(0, 3), true)
	b.shutdown(t)
	o := b.outs.one(t, "A")
	require.Equal(t, batch.Failed, o.Status, "never reported complete")
	require.EqualError(t, o.CleanupErr, "cleanup: connection refused")
	s := b.c.Stats()
	require.Equal(t, int64(1), s.Cleanups)
	require.Equal(t, int64(1), s.CleanupFailures)
	require.Zero(t, s.BatchesCompleted)
}

func TestCleanupPanicIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, s *strategy) { r.failAt["A"] = 1; s.panicCleanup = true })
	b.send(t, "A", orders(0, 3), true)
	b.send(t, "B", orders(0, 3), true)
	b.shutdown(t)
	o := b.outs.one(t, "A")
	var pe *batch.PanicError
	require.ErrorAs(t, o.CleanupErr, &pe)
	require.Equal(t, "cleanup exploded", pe.Value)
	require.Equal(t, batch.Completed, b.outs.one(t, "B").Status)
}

func TestObserverPanicIsRecovered(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	c, err := batch.NewCoordinator[order](newRecorder(), quiet(), batch.WithObserver(func(o batch.Outcome) {
		mu.Lock()
		seen = append(seen, o.BatchID)
		mu.Unlock()
		panic("observer bug")
	}))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	for _, id := range []string{"A", "B", "C"} {
		require.NoError(t, c.Send(context.Background(), batch.Data(id, order{})))
		require.NoError(t, c.Send(context.Background(), batch.End[order](id)))
	}
	require.NoError(t, c.Shutdown(context.Background()))
	require.ElementsMatch(t, []string{"A", "B", "C"}, seen)
	require.Equal(t, int64(3), c.Stats().BatchesCompleted)
}

func TestReusedBatchIDOpensANewBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.send(t, "A", orders(0, 2), true)
	b.send(t, "A", orders(10, 3), true)
	b.send(t, "A", nil, true) // a duplicate end: an empty batch
	b.shutdown(t)
	require.Equal(t, []string{
		"before A", "process A 1 n=2", "after A",
		"before A", "process A 1 n=3", "after A",
		"before A", "after A",
	}, b.rec.Events(), "each batch runs after the previous one with the same ID")
	outs := b.outs.of("A")
	require.Len(t, outs, 3)
	for i, want := range []int64{2, 3, 0} {
		require.Equal(t, batch.Completed, outs[i].Status)
		require.Equal(t, want, outs[i].Items)
	}
}

func TestProcessorGetsOffsetsAndOwnsItems(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var kept [][]order
	var badOffsets []string
	b := setup(t, func(r *recorder, _ *strategy) {
		r.process = func(_ context.Context, b batch.Batch[order]) error {
			mu.Lock()
			defer mu.Unlock()
			if int64(b.Items[0].ID) != b.Offset {
				badOffsets = append(badOffsets, fmt.Sprint(b.ID, b.Seq, b.Offset))
			}
			kept = append(kept, b.Items) // a processor may keep the slice
			return nil
		}
	}, batch.WithMaxBatchSize(4))
	b.send(t, "A", orders(0, 10), true)
	b.send(t, "B", orders(0, 10), true)
	b.shutdown(t)
	require.Empty(t, badOffsets, "Offset counts the items before each sub-batch")
	total := 0
	for _, k := range kept {
		for i := 1; i < len(k); i++ {
			require.Equal(t, k[i-1].ID+1, k[i].ID, "kept slices are not overwritten")
		}
		total += len(k)
	}
	require.Equal(t, 20, total)
}

// Duration covers the batch from its first step to its outcome; with
// synctest's clock it is exact.
func TestOutcomeDuration(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, func(r *recorder, _ *strategy) {
			r.process = func(context.Context, batch.Batch[order]) error {
				time.Sleep(1500 * time.Millisecond) // fake time: the work takes 1.5s
				return nil
			}
		}, batch.WithMaxBatchSize(1))
		b.send(t, "A", orders(0, 2), true)
		b.shutdown(t)
		require.Equal(t, 3*time.Second, b.outs.one(t, "A").Duration)
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t, func(r *recorder, _ *strategy) { r.failAt["bad"] = 2 }, batch.WithMaxBatchSize(10))
	b.send(t, "good", orders(0, 25), true)
	b.send(t, "bad", orders(0, 25), true)
	b.send(t, "open", orders(0, 5), false)
	require.Equal(t, int64(55), b.c.Stats().ItemsReceived)
	b.shutdown(t)
	require.Equal(t, batch.Stats{
		ItemsReceived:       55,
		ItemsDiscarded:      15 + 5, // bad's sub-batches 2 and 3, open's buffered tail
		ItemsProcessed:      25 + 10,
		SubBatchesProcessed: 3 + 1,
		BatchesCompleted:    1,
		BatchesFailed:       1,
		BatchesIncomplete:   1,
		Cleanups:            1, // open never started, so it needs no cleanup
		CleanupFailures:     0,
		InFlight:            0,
		Queued:              0,
	}, b.c.Stats())
}

func TestProcessorSeesStartContextValues(t *testing.T) {
	t.Parallel()
	type key struct{}
	var got any
	p := batch.ProcessorFunc[int](func(ctx context.Context, _ batch.Batch[int]) error {
		got = ctx.Value(key{})
		return nil
	})
	c, err := batch.NewCoordinator(p, quiet())
	require.NoError(t, err)
	require.NoError(t, c.Start(context.WithValue(context.Background(), key{}, "tenant-7")))
	require.NoError(t, c.Send(context.Background(), batch.Data("A", 1)))
	require.NoError(t, c.Send(context.Background(), batch.End[int]("A")))
	require.NoError(t, c.Shutdown(context.Background()))
	require.Equal(t, "tenant-7", got)
}

// With buffer reuse, sub-batches share memory over time; every sub-batch
// must still carry exactly its own items.
func TestBufferReuseKeepsItemsIntact(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	next := map[string]int{}
	var bad []string
	b := setup(t, func(r *recorder, _ *strategy) {
		r.process = func(_ context.Context, b batch.Batch[order]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range b.Items {
				if it.ID != next[b.ID] {
					bad = append(bad, fmt.Sprintf("%s: want %d got %d", b.ID, next[b.ID], it.ID))
				}
				next[b.ID]++
			}
			return nil
		}
	}, batch.WithMaxBatchSize(7), batch.WithBufferReuse(true))
	var wg sync.WaitGroup
	for _, id := range []string{"A", "B", "C"} {
		wg.Go(func() {
			for i := 0; i < 5000; i += 50 {
				if err := b.c.SendMany(context.Background(), id, orders(i, 50)); err != nil {
					t.Error(err)
				}
			}
			_ = b.c.Send(context.Background(), batch.End[order](id))
		})
	}
	wg.Wait()
	b.shutdown(t)
	require.Empty(t, bad)
	for _, id := range []string{"A", "B", "C"} {
		require.Equal(t, int64(5000), b.outs.one(t, id).Items)
	}
}

// A panic in a hook or in MarkComplete fails the batch like a panic in
// Process: cleanup gets cleanup.SeqUnknown and the worker survives.
func TestHookPanics(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"before", "after", "complete"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			p := &panicky{recorder: rec, where: where}
			strat := &strategy{failComplete: map[string]bool{}}
			outs := &outcomes{byID: map[string][]batch.Outcome{}}
			var cl cleanup.Strategy = strat
			if where == "complete" {
				cl = panickyComplete{strat}
			}
			c, err := batch.NewCoordinator[order](p, quiet(), batch.WithCleanup(cl), batch.WithObserver(outs.add))
			require.NoError(t, err)
			require.NoError(t, c.Start(context.Background()))
			require.NoError(t, c.Send(context.Background(), batch.Data("A", order{})))
			require.NoError(t, c.Send(context.Background(), batch.End[order]("A")))
			require.NoError(t, c.Send(context.Background(), batch.Data("B", order{})))
			require.NoError(t, c.Send(context.Background(), batch.End[order]("B")))
			require.NoError(t, c.Shutdown(context.Background()))
			o := outs.one(t, "A")
			require.Equal(t, batch.Failed, o.Status)
			require.Equal(t, cleanup.SeqUnknown, o.Seq)
			var pe *batch.PanicError
			require.ErrorAs(t, o.Err, &pe)
			var perr *batch.ProcessError
			require.ErrorAs(t, o.Err, &perr)
			require.Equal(t, where, perr.Op)
			require.Contains(t, strat.Calls(), "cleanup A -1")
			require.Equal(t, batch.Completed, outs.one(t, "B").Status)
		})
	}
}

// panicky is a recorder whose hooks panic for batch A.
type panicky struct {
	*recorder
	where string
}

func (p *panicky) BeforeBatch(ctx context.Context, id string) error {
	if id == "A" && p.where == "before" {
		panic("before hook exploded")
	}
	return p.recorder.BeforeBatch(ctx, id)
}

func (p *panicky) AfterBatch(ctx context.Context, id string) error {
	if id == "A" && p.where == "after" {
		panic("after hook exploded")
	}
	return p.recorder.AfterBatch(ctx, id)
}

type panickyComplete struct{ *strategy }

func (s panickyComplete) MarkComplete(ctx context.Context, id string) error {
	if id == "A" {
		panic("mark complete exploded")
	}
	return s.strategy.MarkComplete(ctx, id)
}

// A genuine error that arrives while a hard stop is under way is still a
// failure, with its sequence, not an Incomplete.
func TestGenuineFailureDuringAStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		inProcess := make(chan struct{})
		b := setup(t, untilCancelled(inProcess, func(context.Context) error {
			return errConstraint // not a context error
		}))
		b.send(t, "A", orders(0, 3), true)
		<-inProcess
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.Error(t, b.c.Shutdown(ctx))
		<-b.c.Done()
		o := b.outs.one(t, "A")
		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 1, o.Seq)
		require.ErrorIs(t, o.Err, errConstraint)
	})
}

// A logger whose handler panics loses no outcome.
func TestPanickingLoggerLosesNoOutcome(t *testing.T) {
	t.Parallel()
	outs := &outcomes{byID: map[string][]batch.Outcome{}}
	rec := newRecorder()
	rec.failAt["bad"] = 1
	c, err := batch.NewCoordinator[order](rec, batch.WithObserver(outs.add),
		batch.WithLogger(slog.New(panickingHandler{})))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	for _, id := range []string{"good", "bad"} {
		require.NoError(t, c.Send(context.Background(), batch.Data(id, order{})))
		require.NoError(t, c.Send(context.Background(), batch.End[order](id)))
	}
	require.NoError(t, c.Shutdown(context.Background()))
	require.Equal(t, batch.Completed, outs.one(t, "good").Status)
	require.Equal(t, batch.Failed, outs.one(t, "bad").Status)
}

type panickingHandler struct{}

func (panickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingHandler) Handle(context.Context, slog.Record) error { panic("log handler exploded") }
func (h panickingHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h panickingHandler) WithGroup(string) slog.Handler           { return h }
