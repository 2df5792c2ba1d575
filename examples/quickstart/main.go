// Command quickstart runs sheaf's batch engine in memory: four producers send
// interleaved batches of orders, one batch hits a bad record in its third
// sub-batch and is cleaned up, and the program prints progress and a summary.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// Order is the item the producers send.
type Order struct {
	ID    int
	Cents int64
}

// table stands in for a database table: rows by batch ID. Each Process call
// is one "transaction": it validates the whole sub-batch first, so a bad
// record writes nothing.
type table struct {
	mu   sync.Mutex
	rows map[string][]Order
}

var errNegative = errors.New("negative amount")

func (t *table) Process(ctx context.Context, b batch.Batch[Order]) error {
	time.Sleep(2 * time.Millisecond) // the cost of a transaction in a database
	for _, o := range b.Items {
		if o.Cents < 0 {
			return fmt.Errorf("order %d: %w", o.ID, errNegative)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows[b.ID] = append(t.rows[b.ID], b.Items...)
	return nil
}

// Cleanup deletes every row of a failed batch, as a DELETE ... WHERE
// batch_id = ? would.
func (t *table) Cleanup(ctx context.Context, batchID string, failedSeq int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.rows, batchID)
	return nil
}

func (t *table) count(batchID string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rows[batchID])
}

func main() {
	maxBatch := flag.Int("max-batch", 1000, "largest sub-batch")
	workers := flag.Int("workers", batch.DefaultWorkers, "batch IDs processed at once")
	flag.Parse()
	if err := run(*maxBatch, *workers); err != nil {
		log.Fatal(err)
	}
}

func run(maxBatch, workers int) error {
	store := &table{rows: map[string][]Order{}}
	var mu sync.Mutex
	var outcomes []batch.Outcome

	c, err := batch.NewCoordinator[Order](store,
		batch.WithMaxBatchSize(maxBatch),
		batch.WithWorkers(workers),
		batch.WithCleanup(cleanup.Func(store.Cleanup)),
		batch.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))),
		batch.WithObserver(func(o batch.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, o)
		}))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		return err
	}

	batches := []struct {
		id   string
		size int
		bad  int // index of a record with a negative amount, or -1
	}{
		{"ORDERS-EU", 20_000, -1},
		{"ORDERS-US", 35_000, -1},
		{"ORDERS-APAC", 12_500, -1},
		{"REFUNDS", 3*maxBatch + 100, 2*maxBatch + 17}, // the bad record is in sub-batch 3
	}
	fmt.Printf("sending %d batches with max batch size %d on %d workers\n", len(batches), maxBatch, workers)

	// Progress, from the coordinator's counters.
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s := c.Stats()
				fmt.Printf("  progress: %6d received, %6d processed, %3d sub-batches, %d done, %d failed\n",
					s.ItemsReceived, s.ItemsProcessed, s.SubBatchesProcessed, s.BatchesCompleted, s.BatchesFailed)
			case <-stopProgress:
				return
			}
		}
	}()

	// Producers, one per batch, run at the same time so their items interleave.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(batches))
	for _, b := range batches {
		wg.Go(func() {
			for i := range b.size {
				o := Order{ID: i, Cents: int64(100 + i%900)}
				if i == b.bad {
					o.Cents = -5
				}
				if err := c.Send(ctx, batch.Data(b.id, o)); err != nil {
					errs <- err
					return
				}
			}
			errs <- c.Send(ctx, batch.End[Order](b.id))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		return err
	}
	close(stopProgress)
	<-progressDone

	slices.SortFunc(outcomes, func(a, b batch.Outcome) int { return strings.Compare(a.BatchID, b.BatchID) })
	fmt.Printf("\nall batches finished in %v\n\n", time.Since(start).Round(time.Millisecond))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "BATCH\tSTATUS\tSUB-BATCHES\tITEMS\tROWS STORED\tDURATION\tDETAIL")
	for _, o := range outcomes {
		detail := ""
		if o.Err != nil {
			detail = fmt.Sprintf("%v; cleaned up after sub-batch %d", o.Err, o.Seq)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%v\t%s\n", o.BatchID, o.Status, o.SubBatches, o.Items,
			store.count(o.BatchID), o.Duration.Round(time.Millisecond), detail)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	s := c.Stats()
	undone := failedItems(outcomes)
	fmt.Printf("\n%d items received = %d stored + %d written and then cleaned up + %d never written (discarded with the failed batch)\n",
		s.ItemsReceived, s.ItemsProcessed-undone, undone, s.ItemsDiscarded)
	return nil
}

// failedItems counts items that were processed and then cleaned up.
func failedItems(outs []batch.Outcome) int64 {
	var n int64
	for _, o := range outs {
		if o.Status != batch.Completed {
			n += o.Items
		}
	}
	return n
}
