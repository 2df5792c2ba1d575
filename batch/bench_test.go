package batch_test

import (
	"context"
	"testing"

	"github.com/sheaf-dev/sheaf/batch"
)

// benchItem is a small record, the shape of a typical DTO's hot fields.
type benchItem struct {
	ID     int64
	Amount int64
	Ref    string
}

func nopProcessor() batch.Processor[benchItem] {
	return batch.ProcessorFunc[benchItem](func(context.Context, batch.Batch[benchItem]) error { return nil })
}

func startBench(b *testing.B, opts ...batch.Option) *batch.Coordinator[benchItem] {
	b.Helper()
	c, err := batch.NewCoordinator(nopProcessor(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

func stopBench(b *testing.B, c *batch.Coordinator[benchItem]) {
	b.Helper()
	if err := c.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChannelBaseline is the yardstick for BenchmarkCoordinatorSend: the
// same item type through a plain buffered channel (capacity 4096), one send
// per item, drained by one goroutine.
func BenchmarkChannelBaseline(b *testing.B) {
	ch := make(chan benchItem, 4096)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	it := benchItem{ID: 1, Amount: 2, Ref: "ref"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		it.ID = int64(i)
		ch <- it
	}
	close(ch)
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkCoordinatorSend sends one item per Send under default options,
// with an end-of-batch every 100,000 items, and counts the time until every
// batch is processed.
func BenchmarkCoordinatorSend(b *testing.B) { benchSend(b) }

// BenchmarkCoordinatorSendReuse is BenchmarkCoordinatorSend with
// WithBufferReuse(true).
func BenchmarkCoordinatorSendReuse(b *testing.B) { benchSend(b, batch.WithBufferReuse(true)) }

func benchSend(b *testing.B, opts ...batch.Option) {
	const perBatch = 100_000
	c := startBench(b, opts...)
	ctx := context.Background()
	it := benchItem{ID: 1, Amount: 2, Ref: "ref"}
	ids := []string{"A", "B", "C", "D"}
	b.ReportAllocs()
	b.ResetTimer()
	for sent, k := 0, 0; sent < b.N; k++ {
		id := ids[k%len(ids)]
		n := min(perBatch, b.N-sent)
		for i := range n {
			it.ID = int64(sent + i)
			if err := c.Send(ctx, batch.Data(id, it)); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Send(ctx, batch.End[benchItem](id)); err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	stopBench(b, c)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkCoordinatorSendMany sends 1,000 items per SendMany under default
// options.
func BenchmarkCoordinatorSendMany(b *testing.B) { benchSendMany(b) }

// BenchmarkCoordinatorSendManyReuse is BenchmarkCoordinatorSendMany with
// WithBufferReuse(true).
func BenchmarkCoordinatorSendManyReuse(b *testing.B) { benchSendMany(b, batch.WithBufferReuse(true)) }

func benchSendMany(b *testing.B, opts ...batch.Option) {
	const chunk = 1000
	c := startBench(b, opts...)
	ctx := context.Background()
	items := make([]benchItem, chunk)
	for i := range items {
		items[i] = benchItem{ID: int64(i), Amount: 2, Ref: "ref"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += chunk {
		n := min(chunk, b.N-sent)
		if err := c.SendMany(ctx, "A", items[:n]); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Send(ctx, batch.End[benchItem]("A")); err != nil {
		b.Fatal(err)
	}
	stopBench(b, c)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
