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

// BenchmarkChannelBaseline is the yardstick for BenchmarkCoordinatorSend and
// BenchmarkCoordinatorConsume: the same item type through a plain buffered
// channel (capacity 4096), one send per item, drained by one goroutine.
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
	c := startBench(b, opts...)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	benchMessages(b.N, func(m batch.Message[benchItem]) {
		if err := c.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
	})
	stopBench(b, c)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkCoordinatorConsume is BenchmarkCoordinatorSend through Consume:
// the benchmark's goroutine sends the same messages into a channel of the
// baseline's capacity, and Consume drains it into the coordinator.
func BenchmarkCoordinatorConsume(b *testing.B) {
	c := startBench(b)
	in := make(chan batch.Message[benchItem], 4096)
	consumed := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { consumed <- c.Consume(context.Background(), in) }()
	benchMessages(b.N, func(m batch.Message[benchItem]) { in <- m })
	close(in)
	if err := <-consumed; err != nil {
		b.Fatal(err)
	}
	stopBench(b, c)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// benchMessages calls send with n items of benchItem, spread over four batch
// IDs in turn, with an end-of-batch every 100,000 items.
func benchMessages(n int, send func(batch.Message[benchItem])) {
	const perBatch = 100_000
	it := benchItem{ID: 1, Amount: 2, Ref: "ref"}
	ids := []string{"A", "B", "C", "D"}
	for sent, k := 0, 0; sent < n; k++ {
		id := ids[k%len(ids)]
		m := min(perBatch, n-sent)
		for i := range m {
			it.ID = int64(sent + i)
			send(batch.Data(id, it))
		}
		send(batch.End[benchItem](id))
		sent += m
	}
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
