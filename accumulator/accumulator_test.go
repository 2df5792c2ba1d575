package accumulator_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/accumulator"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// collector is a sink that records everything in the order it was emitted.
type collector struct {
	subs   []accumulator.SubBatch[int]
	closed []accumulator.Summary
	order  []string // "sub:ID:seq" and "closed:ID"
}

func (c *collector) sink() accumulator.Sink[int] {
	return accumulator.Sink[int]{
		SubBatch: func(sb accumulator.SubBatch[int]) {
			c.subs = append(c.subs, sb)
			c.order = append(c.order, fmt.Sprintf("sub:%s:%d", sb.BatchID, sb.Seq))
		},
		Closed: func(s accumulator.Summary) {
			c.closed = append(c.closed, s)
			c.order = append(c.order, "closed:"+s.BatchID)
		},
	}
}

func setup(t *testing.T, max int) (*accumulator.Accumulator[int], *collector) {
	t.Helper()
	col := &collector{}
	return accumulator.New(max, col.sink()), col
}

func sizes(subs []accumulator.SubBatch[int]) []int {
	out := make([]int, len(subs))
	for i, sb := range subs {
		out[i] = len(sb.Items)
	}
	return out
}

func TestSplitting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		total, max int
		want       []int
	}{
		{"zero items", 0, 5, []int{}},
		{"one item", 1, 5, []int{1}},
		{"one below max", 4, 5, []int{4}},
		{"exactly max", 5, 5, []int{5}},
		{"max plus one", 6, 5, []int{5, 1}},
		{"two full", 10, 5, []int{5, 5}},
		{"spec example 1: 100 of 5000", 100, 5000, []int{100}},
		{"spec example 2: 10000 of 5000", 10000, 5000, []int{5000, 5000}},
		{"spec example 3: 7500 of 5000", 7500, 5000, []int{5000, 2500}},
		{"max of one", 3, 1, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			acc, col := setup(t, tc.max)
			for i := range tc.total {
				require.True(t, acc.Add("A", i))
			}
			require.True(t, acc.Close("A"))
			require.Equal(t, tc.want, sizes(col.subs))
			next := 0
			for i, sb := range col.subs {
				require.Equal(t, i+1, sb.Seq, "sequence numbers run 1..n")
				require.Equal(t, int64(next), sb.Offset)
				for _, v := range sb.Items {
					require.Equal(t, next, v, "items keep their order")
					next++
				}
			}
			require.Equal(t, tc.total, next)
			require.Len(t, col.closed, 1)
			require.Equal(t, accumulator.Summary{
				Ended: true, BatchID: "A", Gen: col.closed[0].Gen,
				SubBatches: len(tc.want), Items: int64(tc.total),
			}, col.closed[0])
		})
	}
}

func TestSubBatchIsEmittedAsSoonAsFull(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	acc.Add("A", 1)
	acc.Add("A", 2)
	require.Empty(t, col.subs, "nothing before the sub-batch is full")
	acc.Add("A", 3)
	require.Len(t, col.subs, 1, "the full sub-batch is emitted without waiting for the end")
	require.Equal(t, []int{1, 2, 3}, col.subs[0].Items)
	require.Empty(t, col.closed)
}

func TestGroupsByBatchID(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 2)
	for i := range 5 {
		acc.Add("A", i)
		acc.Add("B", 10+i)
	}
	acc.Close("B")
	acc.Close("A")
	require.Equal(t, []string{
		"sub:A:1", "sub:B:1", "sub:A:2", "sub:B:2", "sub:B:3", "closed:B", "sub:A:3", "closed:A",
	}, col.order)
	got := map[string][]int{}
	for _, sb := range col.subs {
		got[sb.BatchID] = append(got[sb.BatchID], sb.Items...)
	}
	require.Equal(t, []int{0, 1, 2, 3, 4}, got["A"])
	require.Equal(t, []int{10, 11, 12, 13, 14}, got["B"])
	require.NotEqual(t, col.closed[0].Gen, col.closed[1].Gen)
	require.Equal(t, 0, acc.Len())
}

func TestAddManyMatchesAdd(t *testing.T) {
	t.Parallel()
	one, colOne := setup(t, 4)
	many, colMany := setup(t, 4)
	items := make([]int, 11)
	for i := range items {
		items[i] = i
		one.Add("A", i)
	}
	many.AddMany("A", items[:3])
	many.AddMany("A", items[3:10])
	many.AddMany("A", nil)
	many.AddMany("A", items[10:])
	one.Close("A")
	many.Close("A")
	require.Equal(t, colOne.order, colMany.order)
	require.Equal(t, sizes(colOne.subs), sizes(colMany.subs))
	for i := range colOne.subs {
		require.Equal(t, colOne.subs[i].Items, colMany.subs[i].Items)
	}
	require.Equal(t, int64(11), many.Received())
}

func TestAddManyDoesNotKeepTheCallersSlice(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	items := []int{1, 2, 3, 4}
	acc.AddMany("A", items)
	items[0], items[3] = 100, 400 // caller reuses its slice
	acc.Close("A")
	require.Equal(t, []int{1, 2, 3}, col.subs[0].Items)
	require.Equal(t, []int{4}, col.subs[1].Items)
}

func TestCloseWithoutItemsEndsAnEmptyBatch(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	require.True(t, acc.Close("A"))
	require.Empty(t, col.subs)
	require.Len(t, col.closed, 1)
	require.True(t, col.closed[0].Ended)
	require.Zero(t, col.closed[0].SubBatches)
	require.Equal(t, uint64(1), acc.Opened())
}

func TestItemsAfterCloseOpenANewBatch(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	acc.Add("A", 1)
	acc.Close("A")
	acc.Add("A", 2)
	acc.Close("A")
	acc.Close("A") // a duplicate end: an empty batch
	require.Len(t, col.closed, 3)
	require.Less(t, col.closed[0].Gen, col.closed[1].Gen)
	require.Less(t, col.closed[1].Gen, col.closed[2].Gen)
	require.Equal(t, col.closed[0].Gen, col.subs[0].Gen)
	require.Equal(t, col.closed[1].Gen, col.subs[1].Gen)
	require.Equal(t, 1, col.subs[1].Seq, "a new batch numbers its sub-batches from 1")
	require.Equal(t, int64(0), col.closed[2].Items)
}

func TestFailDiscardsTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	for i := range 5 {
		acc.Add("A", i)
	}
	gen := col.subs[0].Gen
	require.Equal(t, 2, acc.Fail("A", gen), "the unfilled tail is dropped")
	require.Zero(t, acc.Fail("A", gen), "failing twice drops nothing more")
	for i := range 7 {
		acc.Add("A", i)
	}
	acc.AddMany("A", []int{1, 2, 3})
	acc.Close("A")
	require.Len(t, col.subs, 1, "a failed batch emits no more sub-batches")
	require.Equal(t, accumulator.Summary{
		Ended: true, BatchID: "A", Gen: gen, SubBatches: 1, Items: 3, Discarded: 12, Failed: true,
	}, col.closed[0])

	acc.Add("A", 9) // the next batch of A is not affected
	acc.Close("A")
	require.Len(t, col.subs, 2)
	require.False(t, col.closed[1].Failed)
}

func TestFailOfAClosedBatchDoesNothing(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	acc.Add("A", 1)
	acc.Close("A")
	old := col.closed[0].Gen
	acc.Add("A", 2)
	require.Zero(t, acc.Fail("A", old), "an old generation cannot fail the new batch")
	require.Zero(t, acc.Fail("B", 1))
	acc.Close("A")
	require.False(t, col.closed[1].Failed)
	require.Equal(t, []int{2}, col.subs[1].Items)
}

func TestAbandonLetsGoOfOpenBatchesAndSeals(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 3)
	for i := range 4 {
		acc.Add("A", i)
	}
	acc.Add("B", 1)
	acc.Add("C", 1)
	acc.Close("C")
	require.Equal(t, 2, acc.Abandon())
	require.Len(t, col.subs, 2, "tails are not emitted") // A:1 and C:1
	byID := map[string]accumulator.Summary{}
	for _, s := range col.closed[1:] {
		byID[s.BatchID] = s
	}
	require.False(t, byID["A"].Ended)
	require.Equal(t, 1, byID["A"].Buffered)
	require.Equal(t, int64(3), byID["A"].Items)
	require.Equal(t, 1, byID["B"].Buffered)
	require.Zero(t, acc.Len())

	require.False(t, acc.Add("A", 1), "sealed")
	require.False(t, acc.AddMany("A", []int{1}))
	require.False(t, acc.Close("A"))
	require.Zero(t, acc.Abandon())
	require.Equal(t, int64(6), acc.Received(), "refused items are not counted")
}

func TestBuffersGrowWithTheBatch(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 1000)
	acc.Add("small", 1)
	acc.Close("small")
	require.Less(t, cap(col.subs[0].Items), 1000, "a one-item batch does not reserve a full sub-batch")
	for i := range 2500 {
		acc.Add("big", i)
	}
	acc.Close("big")
	for _, sb := range col.subs[1:] {
		require.LessOrEqual(t, cap(sb.Items), 1000, "never beyond max")
	}
}

func TestConcurrentProducersKeepTheirOrder(t *testing.T) {
	t.Parallel()
	got := map[string][]int{} // written by the sink under the accumulator's lock
	acc := accumulator.New(7, accumulator.Sink[int]{
		SubBatch: func(sb accumulator.SubBatch[int]) { got[sb.BatchID] = append(got[sb.BatchID], sb.Items...) },
		Closed:   func(accumulator.Summary) {},
	})
	const producers, perProducer = 8, 1000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			id := fmt.Sprint("P", p%4) // two producers per batch ID
			for i := range perProducer {
				if i%10 == 0 {
					acc.AddMany(id, []int{p*perProducer + i})
				} else {
					acc.Add(id, p*perProducer+i)
				}
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		acc.Close(fmt.Sprint("P", i))
	}
	total := 0
	for _, items := range got {
		last := map[int]int{} // producer → last value seen
		for _, v := range items {
			p := v / perProducer
			if prev, ok := last[p]; ok {
				require.Greater(t, v, prev, "a producer's items keep their order")
			}
			last[p] = v
		}
		total += len(items)
	}
	require.Equal(t, producers*perProducer, total, "no item lost or duplicated")
}

func TestNewRejectsBadArguments(t *testing.T) {
	t.Parallel()
	ok := accumulator.Sink[int]{SubBatch: func(accumulator.SubBatch[int]) {}, Closed: func(accumulator.Summary) {}}
	require.Panics(t, func() { accumulator.New(0, ok) })
	require.Panics(t, func() { accumulator.New(1, accumulator.Sink[int]{Closed: ok.Closed}) })
	require.Panics(t, func() { accumulator.New(1, accumulator.Sink[int]{SubBatch: ok.SubBatch}) })
	require.Equal(t, 3, accumulator.New(3, ok).Max())
}

// FuzzSplitting checks the splitting invariant for any total, max and way of
// feeding items: sizes sum to the total, each is at most max and only the
// last may be smaller, sequences run 1..n, and the items come out in order.
func FuzzSplitting(f *testing.F) {
	f.Add(uint16(0), uint16(1), uint8(1))
	f.Add(uint16(1), uint16(5000), uint8(3))
	f.Add(uint16(5000), uint16(5000), uint8(0))
	f.Add(uint16(5001), uint16(5000), uint8(7))
	f.Add(uint16(7500), uint16(5000), uint8(250))
	f.Fuzz(func(t *testing.T, total, max uint16, chunk uint8) {
		if max == 0 {
			max = 1
		}
		acc, col := setup(t, int(max))
		items := make([]int, total)
		for i := range items {
			items[i] = i
		}
		for len(items) > 0 { // chunk 0 sends one by one, else in chunks
			if chunk == 0 {
				acc.Add("F", items[0])
				items = items[1:]
				continue
			}
			n := min(int(chunk), len(items))
			acc.AddMany("F", items[:n])
			items = items[n:]
		}
		acc.Close("F")
		want := (int(total) + int(max) - 1) / int(max)
		require.Len(t, col.subs, want)
		next := 0
		for i, sb := range col.subs {
			require.Equal(t, i+1, sb.Seq)
			require.Equal(t, int64(next), sb.Offset)
			require.LessOrEqual(t, len(sb.Items), int(max))
			if i < len(col.subs)-1 {
				require.Equal(t, int(max), len(sb.Items), "only the last sub-batch may be short")
			}
			for _, v := range sb.Items {
				require.Equal(t, next, v)
				next++
			}
		}
		require.Equal(t, int(total), next)
		require.Equal(t, int64(total), col.closed[0].Items)
	})
}

func TestRecycleClearsAndReusesFullBuffers(t *testing.T) {
	t.Parallel()
	acc, col := setup(t, 4)
	for i := range 8 {
		acc.Add("A", i+1)
	}
	first := col.subs[0].Items
	acc.Recycle(first)
	require.Equal(t, []int{0, 0, 0, 0}, first, "a recycled buffer keeps no old values")
	acc.Recycle([]int{1, 2}) // not full-size: ignored
	for i := range 8 {
		acc.Add("A", 100+i)
	}
	acc.Close("A")
	// Whether the pool returned the buffer is up to sync.Pool; what must
	// hold either way is that every sub-batch has the right items.
	require.Equal(t, []int{100, 101, 102, 103}, col.subs[2].Items)
	require.Equal(t, []int{104, 105, 106, 107}, col.subs[3].Items)
	require.Equal(t, []int{5, 6, 7, 8}, col.subs[1].Items, "a sub-batch not recycled is untouched")
}

// FuzzOperations runs random sequences of Add, AddMany, Close, Fail and a
// final Abandon over three batch IDs and checks the accounting: every item
// received is in a sub-batch, discarded, or buffered when abandoned; every
// batch gets exactly one summary; sub-batches of a batch are numbered 1..n
// with consistent offsets; and items keep their order within a batch.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 1, 5, 3, 0, 2})
	f.Add([]byte{1, 9, 3, 1, 4, 2, 0, 6, 2, 8})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		col := &collector{}
		acc := accumulator.New(3, col.sink())
		ids := []string{"A", "B", "C"}
		lastGen := map[string]uint64{}
		next := 0
		for i := 0; i+1 < len(ops); i += 2 {
			id, arg := ids[int(ops[i+1])%3], int(ops[i+1])
			switch ops[i] % 4 {
			case 0:
				acc.Add(id, next)
				next++
			case 1:
				items := make([]int, arg%7)
				for k := range items {
					items[k] = next
					next++
				}
				acc.AddMany(id, items)
			case 2:
				acc.Close(id)
			case 3:
				gen := lastGen[id]
				if arg%2 == 0 {
					gen = acc.Opened() // the newest batch, whichever ID it has
				}
				acc.Fail(id, gen)
			}
			for _, sb := range col.subs {
				lastGen[sb.BatchID] = sb.Gen
			}
		}
		acc.Abandon()

		var inSubs, discarded, buffered int64
		summaries := map[uint64]accumulator.Summary{}
		for _, s := range col.closed {
			_, dup := summaries[s.Gen]
			require.False(t, dup, "one summary per batch")
			summaries[s.Gen] = s
			discarded += s.Discarded
			buffered += int64(s.Buffered)
		}
		require.Len(t, summaries, int(acc.Opened()), "every opened batch was closed or abandoned")
		seqs := map[uint64]int{}
		offsets := map[uint64]int64{}
		lastItem := map[uint64]int{}
		for _, sb := range col.subs {
			require.Equal(t, seqs[sb.Gen]+1, sb.Seq)
			require.Equal(t, offsets[sb.Gen], sb.Offset)
			require.LessOrEqual(t, len(sb.Items), 3)
			for _, v := range sb.Items {
				if prev, ok := lastItem[sb.Gen]; ok {
					require.Greater(t, v, prev, "items keep their order")
				}
				lastItem[sb.Gen] = v
			}
			seqs[sb.Gen] = sb.Seq
			offsets[sb.Gen] += int64(len(sb.Items))
			inSubs += int64(len(sb.Items))
		}
		for gen, s := range summaries {
			require.Equal(t, seqs[gen], s.SubBatches)
			require.Equal(t, offsets[gen], s.Items)
		}
		require.Equal(t, acc.Received(), inSubs+discarded+buffered, "every item is accounted for")
		require.Equal(t, int64(next), acc.Received())
	})
}
