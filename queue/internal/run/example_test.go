package run_test

import (
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/run"
)

// A pool of two workers runs what is pushed, and Stop returns once they
// have run everything waiting.
func ExamplePool() {
	done := make(chan int, 3)
	p := run.NewPool(func(n int) { done <- n * n })
	p.Start(2)
	p.Push(false, 1, 2, 3)
	p.Stop()
	close(done)
	sum := 0
	for sq := range done {
		sum += sq
	}
	fmt.Println(sum)
	// Output: 14
}

// A batcher hands what is sent to Flush, many at a time; Stop flushes the
// rest.
func ExampleBatcher() {
	total := 0
	b := run.Batcher[int]{Max: 100, LingerBatch: 10, Linger: time.Millisecond,
		Busy:  func() bool { return false },
		Flush: func(batch []int) { total += len(batch) }}
	b.Start(16)
	for i := range 1000 {
		b.Send(i)
	}
	b.Stop()
	fmt.Println(total)
	// Output: 1000
}
