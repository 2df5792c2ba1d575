package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// A processor persists one sub-batch; here it prints it. Outcomes arrive from
// worker goroutines, so the example collects them and prints them sorted.
func Example() {
	type Order struct{ ID, Cents int }

	processor := batch.ProcessorFunc[Order](func(ctx context.Context, b batch.Batch[Order]) error {
		// A real processor writes b.Items in one transaction.
		return nil
	})
	var mu sync.Mutex
	var report []string
	c, err := batch.NewCoordinator(processor,
		batch.WithMaxBatchSize(2),
		batch.WithLogger(slog.New(slog.DiscardHandler)),
		batch.WithObserver(func(o batch.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			report = append(report, fmt.Sprintf("%s %s: %d items in %d sub-batches", o.BatchID, o.Status, o.Items, o.SubBatches))
		}))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	for i := range 5 {
		_ = c.Send(ctx, batch.Data("ORDER-001", Order{ID: i, Cents: 100 * i}))
	}
	_ = c.Send(ctx, batch.End[Order]("ORDER-001"))
	_ = c.SendMany(ctx, "ORDER-002", []Order{{ID: 10}, {ID: 11}})
	_ = c.Send(ctx, batch.End[Order]("ORDER-002"))
	if err := c.Shutdown(ctx); err != nil {
		panic(err)
	}
	slices.Sort(report)
	for _, line := range report {
		fmt.Println(line)
	}
	// Output:
	// ORDER-001 completed: 5 items in 3 sub-batches
	// ORDER-002 completed: 2 items in 1 sub-batches
}

// Consume drains a channel that producers fill, until its owner closes it.
func ExampleCoordinator_Consume() {
	var mu sync.Mutex
	var report []string
	c, err := batch.NewCoordinator(batch.ProcessorFunc[string](func(ctx context.Context, b batch.Batch[string]) error {
		mu.Lock()
		defer mu.Unlock()
		report = append(report, fmt.Sprintf("%s #%d %v", b.ID, b.Seq, b.Items))
		return nil
	}), batch.WithMaxBatchSize(2), batch.WithWorkers(1), batch.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	in := make(chan batch.Message[string])
	go func() {
		defer close(in) // the producer owns the channel, so it closes it
		for _, line := range []string{"alpha", "beta", "gamma"} {
			in <- batch.Data("lines-1", line)
		}
		in <- batch.End[string]("lines-1")
	}()
	if err := c.Consume(ctx, in); err != nil { // returns nil once in is closed
		panic(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		panic(err)
	}
	for _, line := range report {
		fmt.Println(line)
	}
	// Output:
	// lines-1 #1 [alpha beta]
	// lines-1 #2 [gamma]
}

// When a sub-batch fails, the cleanup strategy removes what the batch's
// earlier sub-batches wrote, so the batch is all-or-nothing.
func ExampleWithCleanup() {
	var mu sync.Mutex
	stored := map[string]int{} // rows per batch ID: a stand-in for a table
	processor := batch.ProcessorFunc[int](func(ctx context.Context, b batch.Batch[int]) error {
		mu.Lock()
		defer mu.Unlock()
		if b.ID == "bad" && b.Seq == 2 {
			return errors.New("constraint violation")
		}
		stored[b.ID] += len(b.Items)
		return nil
	})
	deleteBatch := cleanup.Func(func(ctx context.Context, batchID string, failedSeq int) error {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("cleanup %s after sub-batch %d failed: deleting %d rows\n", batchID, failedSeq, stored[batchID])
		delete(stored, batchID)
		return nil
	})
	c, _ := batch.NewCoordinator(processor, batch.WithMaxBatchSize(3), batch.WithCleanup(deleteBatch),
		batch.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	_ = c.Start(ctx)
	_ = c.SendMany(ctx, "bad", []int{1, 2, 3, 4, 5, 6})
	_ = c.Send(ctx, batch.End[int]("bad"))
	_ = c.Shutdown(ctx)
	fmt.Println("rows left for bad:", stored["bad"])
	// Output:
	// cleanup bad after sub-batch 2 failed: deleting 3 rows
	// rows left for bad: 0
}

// Processors that need to prepare or finish a batch implement the hooks.
type auditedWriter struct{ log []string }

func (w *auditedWriter) BeforeBatch(_ context.Context, id string) error {
	w.log = append(w.log, "open "+id)
	return nil
}

func (w *auditedWriter) Process(_ context.Context, b batch.Batch[string]) error {
	w.log = append(w.log, fmt.Sprintf("write %s #%d %v", b.ID, b.Seq, b.Items))
	return nil
}

func (w *auditedWriter) AfterBatch(_ context.Context, id string) error {
	w.log = append(w.log, "close "+id)
	return nil
}

func ExampleAfterHook() {
	w := &auditedWriter{}
	c, _ := batch.NewCoordinator[string](w, batch.WithMaxBatchSize(2), batch.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	_ = c.Start(ctx)
	_ = c.SendMany(ctx, "audit-7", []string{"a", "b", "c"})
	_ = c.Send(ctx, batch.End[string]("audit-7"))
	_ = c.Shutdown(ctx) // the writer's log is complete once Shutdown returns
	for _, line := range w.log {
		fmt.Println(line)
	}
	// Output:
	// open audit-7
	// write audit-7 #1 [a b]
	// write audit-7 #2 [c]
	// close audit-7
}
