package batch_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
)

// Ten million items under one batch ID stream through in bounded memory:
// sub-batches reach the processor while the producer is still sending, and
// the heap stays under 64 MiB. Holding the whole batch would take 160 MB
// (16-byte items).
//
// The heap is sampled in the processor at every sub-batch, in the producer
// after every SendMany, and once more at the end. Between samples the heap
// grows toward the garbage collector's goal, which starts a cycle before the
// heap reaches it, so the goal is held to the limit too: it stands for the
// moments no sample sees. The goal changes only when a cycle ends, and a
// cycle takes several samples' worth of allocation, so the samples see every
// goal the collector sets.
func TestStreamingTenMillionItemsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 10M items")
	}
	const (
		total   = 10_000_000
		chunk   = 10_000
		maxSize = 5000
		limit   = 64 << 20
	)
	var heap heapSampler
	var sent atomic.Int64
	var sentAtFirst int64 = -1
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
		heap.sample()
		return nil
	})
	var outcome batch.Outcome
	c, err := batch.NewCoordinator(p, quiet(), batch.WithMaxBatchSize(maxSize), batch.WithWorkers(4),
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
		heap.sample()
	}
	require.NoError(t, c.Send(context.Background(), batch.End[order]("BIG")))
	require.NoError(t, c.Shutdown(context.Background()))
	heap.final()

	require.Equal(t, batch.Completed, outcome.Status)
	require.Equal(t, int64(total), outcome.Items)
	require.Equal(t, total/maxSize, outcome.SubBatches)
	require.Equal(t, int64(total), next)
	require.Less(t, sentAtFirst, int64(total), "the first sub-batch ran before the batch was fully sent")
	require.Equal(t, total/maxSize+total/chunk+1, heap.n, "a sample at every sub-batch, every SendMany and the end")
	require.Positive(t, heap.cycles, "the garbage collector ran while the items streamed")
	t.Logf("peak heap %.1f MiB, peak heap goal %.1f MiB over %d GC cycles, for %d items (%.0f MiB if held at once)",
		float64(heap.peak)/(1<<20), float64(heap.goal)/(1<<20), heap.cycles, total, float64(total*16)/(1<<20))
	require.Less(t, heap.peak, uint64(limit), "peak heap")
	require.Less(t, heap.goal, uint64(limit), "peak heap goal")
}

// heapSampler keeps the highest heap and heap goal it has seen. It reads
// runtime/metrics, which unlike runtime.ReadMemStats does not stop the world,
// so sampling thousands of times costs next to nothing. It is safe for
// concurrent use.
type heapSampler struct {
	mu      sync.Mutex
	samples []metrics.Sample
	start   uint64 // GC cycles at the first sample
	n       int    // samples taken
	peak    uint64 // bytes in heap objects, live or not yet swept: MemStats.HeapAlloc
	goal    uint64 // the heap size the GC aims to stay under before its next cycle
	cycles  uint64 // GC cycles completed between the first sample and the last
}

func (h *heapSampler) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.samples == nil {
		h.samples = []metrics.Sample{
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/heap/goal:bytes"},
			{Name: "/gc/cycles/total:gc-cycles"},
		}
	}
	metrics.Read(h.samples)
	h.peak = max(h.peak, h.samples[0].Value.Uint64())
	h.goal = max(h.goal, h.samples[1].Value.Uint64())
	if h.n == 0 {
		h.start = h.samples[2].Value.Uint64()
	}
	h.cycles = h.samples[2].Value.Uint64() - h.start
	h.n++
}

// final takes the last sample, and checks the heap against ReadMemStats once.
func (h *heapSampler) final() {
	h.sample()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peak = max(h.peak, ms.HeapAlloc)
}
