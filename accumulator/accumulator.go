// Package accumulator groups items by batch ID and cuts each batch into
// sub-batches of at most a fixed size, handing a sub-batch out the moment it is
// full. It knows nothing of goroutines, workers or databases; package
// github.com/sheaf-dev/sheaf/batch wires it to a worker pool.
//
// # Emitting in order
//
// Sub-batches and closed batches are handed to the [Sink] given to [New]
// while the accumulator's lock is held. So the sink sees, for every batch ID,
// sub-batches in sequence order followed by the batch's summary, and the
// summary of one batch before any sub-batch of a later batch with the same ID,
// however many goroutines add items at once. The sink must therefore be quick,
// must not block and must not call the accumulator.
//
// # Batches and generations
//
// A batch is the run of items sent for one batch ID up to its end-of-batch
// ([Accumulator.Close]). Items added after that open a new batch under the same
// ID; each batch gets its own generation number, unique within the
// accumulator, so the two can be told apart downstream.
//
// # Memory
//
// Only the unfilled tail of each open batch is held: at most max-1 items per
// open batch ID. Full sub-batches are handed to the sink and never
// referenced again, so a batch of any length streams through in bounded
// memory. A small batch's buffer grows with it; a batch that has filled a
// sub-batch gets a full-size buffer for the next, so budget max items per
// open batch ID for large batches.
package accumulator

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// SubBatch is one slice of a batch, ready to be processed.
type SubBatch[T any] struct {
	// BatchID is the batch the items were sent for.
	BatchID string
	// Gen identifies which batch of BatchID this is (see the package doc).
	Gen uint64
	// Seq is the 1-based position of the sub-batch within its batch.
	Seq int
	// Offset is the number of items of the batch that came before this
	// sub-batch.
	Offset int64
	// Items holds between 1 and max items, in the order they were added. The
	// accumulator does not keep a reference to it.
	Items []T
}

// Summary describes a batch that the accumulator has let go of, by
// [Accumulator.Close] or [Accumulator.Abandon].
type Summary struct {
	// Ended is true when the batch was closed by Close, false when Abandon
	// let it go.
	Ended   bool
	BatchID string
	Gen     uint64
	// SubBatches is how many sub-batches were handed out, including the
	// remainder returned by Close.
	SubBatches int
	// Items counts the items accepted into sub-batches.
	Items int64
	// Discarded counts items dropped because the batch had failed.
	Discarded int64
	// Buffered counts items that were still waiting in an unfilled sub-batch
	// when Abandon let the batch go. Close never leaves any.
	Buffered int
	// Failed reports that [Accumulator.Fail] was called for this batch.
	Failed bool
}

// Sink receives what an accumulator hands out; see the package doc for the
// order and the rules.
type Sink[T any] struct {
	// SubBatch receives every sub-batch, full ones as they fill and the
	// remainder at Close.
	SubBatch func(SubBatch[T])
	// Closed receives the summary of every batch let go of by Close or
	// Abandon, after its last sub-batch.
	Closed func(Summary)
}

// Accumulator groups items by batch ID. Its methods are safe for concurrent use.
type Accumulator[T any] struct {
	max  int
	sink Sink[T]

	mu       sync.Mutex
	sealed   bool         // set by Abandon: no more items or batches
	received atomic.Int64 // changed under mu, read without it
	open     map[string]*group[T]
	// Most sends are runs of the same ID, so the last group is cached to skip
	// the map lookup.
	lastID string
	last   *group[T]

	opened atomic.Uint64 // generations handed out so far; also the last gen

	free sync.Pool // full-size buffers handed back by Recycle, as *[]T
}

type group[T any] struct {
	gen       uint64
	buf       []T
	seq       int   // sub-batches handed out
	items     int64 // items handed out in sub-batches
	discarded int64
	failed    bool
}

// initialCap is the first buffer size of a batch. Small batches stay small; a
// batch that has filled one sub-batch gets full-size buffers from then on.
const initialCap = 16

// New returns an accumulator that cuts sub-batches of at most max items and
// hands them to sink. It panics if max < 1 or a sink function is nil.
func New[T any](max int, sink Sink[T]) *Accumulator[T] {
	if max < 1 || sink.SubBatch == nil || sink.Closed == nil {
		panic(fmt.Sprintf("accumulator: New(%d) with max < 1 or a nil sink function", max))
	}
	return &Accumulator[T]{max: max, sink: sink, open: make(map[string]*group[T])}
}

// Received returns how many items have been added, discarded ones included.
// It takes no lock.
func (a *Accumulator[T]) Received() int64 { return a.received.Load() }

// Max returns the largest sub-batch size.
func (a *Accumulator[T]) Max() int { return a.max }

// Opened returns how many batches have been opened so far.
func (a *Accumulator[T]) Opened() uint64 { return a.opened.Load() }

// Len returns the number of open batches.
func (a *Accumulator[T]) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.open)
}

// groupLocked returns the open group for id, opening one if there is none.
func (a *Accumulator[T]) groupLocked(id string) *group[T] {
	if a.last != nil && id == a.lastID {
		return a.last
	}
	g := a.open[id]
	if g == nil {
		g = &group[T]{gen: a.opened.Add(1)}
		a.open[id] = g
	}
	a.lastID, a.last = id, g
	return g
}

// Add appends item to the open batch of batchID, opening a batch if none is
// open, and emits the sub-batch it completes, if any. It returns false, and
// takes nothing, after Abandon.
func (a *Accumulator[T]) Add(batchID string, item T) bool {
	a.mu.Lock()
	if a.sealed {
		a.mu.Unlock()
		return false
	}
	a.received.Add(1)
	g := a.groupLocked(batchID)
	if g.failed {
		g.discarded++
		a.mu.Unlock()
		return true
	}
	if len(g.buf) == cap(g.buf) {
		a.grow(g, 1)
	}
	g.buf = append(g.buf, item)
	if len(g.buf) == a.max {
		a.sink.SubBatch(g.cut(batchID))
	}
	a.mu.Unlock()
	return true
}

// AddMany appends items to the open batch of batchID, in order and without
// items of other calls in between, emitting each sub-batch as it fills. It
// returns false, and takes nothing, after Abandon.
func (a *Accumulator[T]) AddMany(batchID string, items []T) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return false
	}
	a.received.Add(int64(len(items)))
	g := a.groupLocked(batchID)
	if g.failed {
		g.discarded += int64(len(items))
		return true
	}
	for len(items) > 0 {
		n := min(a.max-len(g.buf), len(items))
		if len(g.buf)+n > cap(g.buf) {
			a.grow(g, n)
		}
		g.buf = append(g.buf, items[:n]...)
		items = items[n:]
		if len(g.buf) == a.max {
			a.sink.SubBatch(g.cut(batchID))
		}
	}
	return true
}

// Close ends the open batch of batchID: it emits the unfilled tail, if any,
// as the last sub-batch, then the batch's summary. An end with no open batch
// ends an empty one, so every Close ends exactly one batch. A failed batch
// emits no tail. Close returns false, and does nothing, after Abandon.
func (a *Accumulator[T]) Close(batchID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return false
	}
	g := a.groupLocked(batchID)
	if !g.failed && len(g.buf) > 0 {
		a.sink.SubBatch(g.cut(batchID))
	}
	a.forgetLocked(batchID)
	sum := g.summary(batchID)
	sum.Ended = true
	a.sink.Closed(sum)
	return true
}

// Fail marks batch gen of batchID as failed: its unfilled tail is dropped and
// every item added to it until Close is discarded. It returns the number of
// items dropped from the tail. Fail does nothing if that batch is no longer
// open (it was closed, or it is an older generation).
func (a *Accumulator[T]) Fail(batchID string, gen uint64) (dropped int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.open[batchID]
	if g == nil || g.gen != gen || g.failed {
		return 0
	}
	dropped = len(g.buf)
	g.discarded += int64(dropped)
	g.buf = nil
	g.failed = true
	return dropped
}

// Abandon seals the accumulator, so that Add, AddMany and Close refuse
// everything from now on, and lets go of every open batch without emitting
// its tail, emitting their summaries in no particular order. It is for
// shutdown, when end-of-batch messages will not arrive any more. It returns
// how many batches it let go of; calling it again returns 0.
func (a *Accumulator[T]) Abandon() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sealed = true
	n := len(a.open)
	for id, g := range a.open {
		sum := g.summary(id)
		sum.Buffered = len(g.buf)
		g.buf = nil
		a.sink.Closed(sum)
	}
	clear(a.open)
	a.lastID, a.last = "", nil
	return n
}

// Recycle hands back the Items of a sub-batch so that a later sub-batch can
// reuse the memory. Only call it when nothing refers to items any more; the
// accumulator will overwrite them. Slices that are not of full size are
// ignored.
func (a *Accumulator[T]) Recycle(items []T) {
	if cap(items) != a.max {
		return
	}
	items = items[:a.max]
	clear(items) // drop references, so recycled buffers keep nothing alive
	a.free.Put(&items)
}

func (a *Accumulator[T]) forgetLocked(id string) {
	delete(a.open, id)
	if a.lastID == id {
		a.lastID, a.last = "", nil
	}
}

// grow makes room in g for at least extra more items, never beyond max.
func (a *Accumulator[T]) grow(g *group[T], extra int) {
	limit := a.max
	want := len(g.buf) + extra
	var c int
	switch {
	case g.seq > 0:
		// A batch that filled a sub-batch is likely to fill more: take a
		// full-size buffer, a recycled one if there is one.
		if len(g.buf) == 0 {
			if b, ok := a.free.Get().(*[]T); ok {
				g.buf = (*b)[:0]
				return
			}
		}
		c = limit
	case cap(g.buf) == 0:
		c = initialCap
	default:
		c = 2 * cap(g.buf)
	}
	c = min(max(c, want), limit)
	buf := make([]T, len(g.buf), c)
	copy(buf, g.buf)
	g.buf = buf
}

// cut hands out the buffered items as the next sub-batch. The next buffer is
// allocated by the next add, so a batch that ends on a boundary wastes none.
func (g *group[T]) cut(id string) SubBatch[T] {
	g.seq++
	sb := SubBatch[T]{BatchID: id, Gen: g.gen, Seq: g.seq, Offset: g.items, Items: g.buf}
	g.items += int64(len(g.buf))
	g.buf = nil
	return sb
}

func (g *group[T]) summary(id string) Summary {
	return Summary{
		BatchID: id, Gen: g.gen, SubBatches: g.seq, Items: g.items,
		Discarded: g.discarded, Failed: g.failed,
	}
}
