package run

import (
	"sync"
	"time"
)

// Batcher hands what is sent to it to Flush, many at a time: whatever
// arrived while the previous Flush ran goes into the next. While a batch is
// smaller than LingerBatch and Busy reports that more is on its way, it
// waits up to Linger for more, since a statement and a commit per handful
// of results cost more than the wait.
type Batcher[T any] struct {
	Max         int // most items per Flush
	LingerBatch int
	Linger      time.Duration
	Busy        func() bool
	Flush       func([]T)

	in   chan T
	done chan struct{}

	mu        sync.Mutex
	flushed   *sync.Cond // on mu: unflushed went down
	unflushed int        // sent and not yet flushed
}

// Start starts the batcher with room for room items in flight: enough that
// senders finish the next batch while Flush writes this one.
func (b *Batcher[T]) Start(room int) {
	b.in, b.done = make(chan T, room), make(chan struct{})
	b.flushed = sync.NewCond(&b.mu)
	go b.loop()
}

// Send queues v for a Flush, waiting for room.
func (b *Batcher[T]) Send(v T) {
	b.Reserve()
	b.SendReserved(v)
}

// Reserve counts one item that the caller will hand to SendReserved, so
// that a WaitFlushed that begins in between waits for it too: a caller that
// decides under its own lock that an item will be sent, and sends it once
// it has let go of the lock, is never seen with nothing in flight.
func (b *Batcher[T]) Reserve() {
	b.mu.Lock()
	b.unflushed++
	b.mu.Unlock()
}

// SendReserved is Send for an item that Reserve counted.
func (b *Batcher[T]) SendReserved(v T) { b.in <- v }

// Stop flushes what was sent and waits for the last Flush to return. No
// Send may follow or run concurrently.
func (b *Batcher[T]) Stop() {
	close(b.in)
	<-b.done
}

// WaitFlushed waits, at most for limit, until everything sent (or
// reserved) has been flushed, and reports whether it was.
func (b *Batcher[T]) WaitFlushed(limit time.Duration) bool {
	// The deadline first, then the timer that wakes the wait at it: a
	// timer set first could fire before the deadline, and a wait begun
	// after it fired would sleep until the next flush.
	deadline := time.Now().Add(limit)
	timer := time.AfterFunc(limit, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.flushed.Broadcast()
	})
	defer timer.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.unflushed > 0 && time.Now().Before(deadline) {
		b.flushed.Wait()
	}
	return b.unflushed == 0
}

func (b *Batcher[T]) loop() {
	defer close(b.done)
	batch := make([]T, 0, b.Max)
	linger := time.NewTimer(0)
	defer linger.Stop()
	for v := range b.in {
		batch = append(batch[:0], v)
		lingering := false
	gather:
		for len(batch) < b.Max {
			select {
			case more, ok := <-b.in:
				if !ok {
					break gather
				}
				batch = append(batch, more)
				continue
			default:
			}
			if lingering || len(batch) >= b.LingerBatch || !b.Busy() {
				break
			}
			lingering = true
			linger.Reset(b.Linger)
			select {
			case more, ok := <-b.in:
				if !ok {
					break gather
				}
				batch = append(batch, more)
			case <-linger.C:
				break gather
			}
		}
		b.Flush(batch)
		clear(batch)
		b.mu.Lock()
		b.unflushed -= len(batch)
		b.flushed.Broadcast()
		b.mu.Unlock()
	}
}
