package run

import (
	"sync"
	"time"
)

// Batcher hands what is sent to it to Flush, many at a time: whatever
// arrived while the previous Flush ran goes into the next. While a batch is
// smaller than LingerBatch and Busy reports that more is on its way, it
// waits up to Linger for more, since a statement and a commit per handful
// of results cost more than the wait. One Flush runs at a time, unless
// Flushes allows more.
type Batcher[T any] struct {
	Max         int // most items per Flush
	LingerBatch int
	Linger      time.Duration
	Busy        func() bool
	// Flushes, if set, is how many Flush calls may run at once (read
	// before each batch; at least one). More than one pays off where a
	// Flush is mostly a wait (a far server's round trip): the next batch
	// goes out while the last one travels. A batch is gathered only once a
	// Flush may start, so with one allowed, whatever arrived while the last
	// ran goes into the next, as without Flushes.
	Flushes func() int
	Flush   func([]T)

	in   chan T
	done chan struct{}

	mu        sync.Mutex
	flushed   *sync.Cond // on mu: unflushed went down, or a Flush returned
	unflushed int        // sent and not yet flushed
	flushing  int        // Flush calls running
	spare     [][]T      // batches' backing arrays, for the next ones
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
	var flushes sync.WaitGroup
	defer close(b.done)
	defer flushes.Wait()
	linger := time.NewTimer(0)
	defer linger.Stop()
	for v := range b.in {
		at, batch := b.turn()
		batch = append(batch, v)
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
		if at == 1 {
			b.flush(batch) // the loop's own goroutine: the usual case, with no handing over
			continue
		}
		flushes.Go(func() { b.flush(batch) })
	}
}

// turn waits until a Flush may start, counts it as started, and returns
// how many may run at once and an empty batch for it, on a spare backing
// array if there is one.
func (b *Batcher[T]) turn() (at int, batch []T) {
	at = 1
	if b.Flushes != nil {
		at = max(b.Flushes(), 1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.flushing >= at {
		b.flushed.Wait()
	}
	b.flushing++
	if n := len(b.spare); n > 0 {
		batch, b.spare = b.spare[n-1], b.spare[:n-1]
		return at, batch
	}
	return at, make([]T, 0, b.Max)
}

// flush hands batch to Flush, then counts it flushed and keeps its backing
// array for a later batch.
func (b *Batcher[T]) flush(batch []T) {
	b.Flush(batch)
	clear(batch)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spare = append(b.spare, batch[:0])
	b.unflushed -= len(batch)
	b.flushing--
	b.flushed.Broadcast()
}
