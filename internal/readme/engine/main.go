package main

import (
	"context"
	"fmt"
	"log"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

type Order struct{ ID, Cents int64 }

func main() {
	ctx := context.Background()
	// Writes one sub-batch: in a real program, one transaction inserting b.Items.
	processor := batch.ProcessorFunc[Order](func(ctx context.Context, b batch.Batch[Order]) error {
		for _, o := range b.Items {
			if o.Cents < 0 {
				return fmt.Errorf("order %d: negative amount", o.ID)
			}
		}
		return nil
	})
	// Removes what a failed batch wrote: DELETE FROM orders WHERE batch_id = $1.
	undo := cleanup.Func(func(ctx context.Context, batchID string, failedSeq int) error {
		fmt.Printf("%s: deleting what it wrote\n", batchID)
		return nil
	})

	c, err := batch.NewCoordinator(processor,
		batch.WithMaxBatchSize(100),
		batch.WithCleanup(undo),
		batch.WithObserver(func(o batch.Outcome) {
			if o.Err != nil { // every batch ends in exactly one outcome
				fmt.Printf("%s: %s: %v\n", o.BatchID, o.Status, o.Err)
				return
			}
			fmt.Printf("%s: %s, %d items\n", o.BatchID, o.Status, o.Items)
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for i := int64(1); i <= 1000; i++ {
		refund := 100 * i
		if i == 250 {
			refund = -1 // refused: REFUNDS fails in its third sub-batch
		}
		for id, cents := range map[string]int64{"SALES": 100 * i, "REFUNDS": refund} {
			if err := c.Send(ctx, batch.Data(id, Order{ID: i, Cents: cents})); err != nil {
				log.Fatal(err)
			}
		}
	}
	for _, id := range []string{"SALES", "REFUNDS"} {
		if err := c.Send(ctx, batch.End[Order](id)); err != nil {
			log.Fatal(err)
		}
	}

	if err := c.Shutdown(ctx); err != nil { // finishes what was sent
		log.Fatal(err)
	}
}
