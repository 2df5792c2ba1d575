package batch_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
)

// Ten million items under one batch ID stream through in bounded memory:
// sub-batches reach the processor while the producer is still sending, and
// the heap, sampled at every sub-batch, stays under 64 MiB. Holding the
// whole batch would take 160 MB (16-byte items).
func TestStreamingTenMillionItemsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 10M items")
	}
	const (
		total = 10_000_000
		chunk = 10_000
		limit = 64 << 20
	)
	var sent atomic.Int64
	var sentAtFirst int64 = -1
	var peak uint64
	var ms runtime.MemStats
	var next int64
	p := batch.ProcessorFunc[order](func(_ context.Context, b batch.Batch[order]) error {
		// Sub-batches of one batch ID run one at a time, so this state needs
		// no lock.
		if b.Seq == 1 {
			sentAtFirst = sent.Load()
		}
		for _, it := range b.Items {
			if int64(it.ID) != next {
				t.Errorf("item %d arrived as %d", next, it.ID)
				return nil
			}
			next++
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		return nil
	})
	var outcome batch.Outcome
	c, err := batch.NewCoordinator(p, quiet(), batch.WithMaxBatchSize(5000), batch.WithWorkers(4),
		batch.WithObserver(func(o batch.Outcome) { outcome = o }))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	runtime.GC()
	items := make([]order, chunk)
	for base := 0; base < total; base += chunk {
		for i := range items {
			items[i] = order{ID: base + i}
		}
		require.NoError(t, c.SendMany(context.Background(), "BIG", items))
		sent.Add(chunk)
	}
	require.NoError(t, c.Send(context.Background(), batch.End[order]("BIG")))
	require.NoError(t, c.Shutdown(context.Background()))

	require.Equal(t, batch.Completed, outcome.Status)
	require.Equal(t, int64(total), outcome.Items)
	require.Equal(t, total/5000, outcome.SubBatches)
	require.Equal(t, int64(total), next)
	require.Less(t, sentAtFirst, int64(total), "the first sub-batch ran before the batch was fully sent")
	t.Logf("peak heap %.1f MiB for %d items (%.0f MiB if held at once)", float64(peak)/(1<<20), total, float64(total*16)/(1<<20))
	require.Less(t, peak, uint64(limit))
}
