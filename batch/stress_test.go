package batch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
)

// Many producers send to many batch IDs at once, some IDs shared by two
// producers, with Send and SendMany mixed. The test checks that every item
// arrives exactly once, that each producer's items keep their order within a
// batch, that sub-batches of one ID run in sequence and never on two workers
// at once, and that every batch completes.
func TestManyProducersManyBatchIDs(t *testing.T) {
	t.Parallel()
	const (
		producers   = 8
		ids         = 12
		perProducer = 6000
		max         = 64
	)
	type seen struct {
		lastSeq  int
		lastItem map[int]int // producer → last item
		count    int
	}
	var mu sync.Mutex
	state := map[string]*seen{}
	var problems []string
	b := setup(t, func(r *recorder, _ *strategy) {
		r.process = func(_ context.Context, b batch.Batch[order]) error {
			mu.Lock()
			defer mu.Unlock()
			s := state[b.ID]
			if s == nil {
				s = &seen{lastItem: map[int]int{}}
				state[b.ID] = s
			}
			if b.Seq != s.lastSeq+1 {
				problems = append(problems, fmt.Sprintf("%s: seq %d after %d", b.ID, b.Seq, s.lastSeq))
			}
			s.lastSeq = b.Seq
			for _, it := range b.Items {
				p := it.Amount // the producer
				if last, ok := s.lastItem[p]; ok && it.ID <= last {
					problems = append(problems, fmt.Sprintf("%s: producer %d sent %d after %d", b.ID, p, it.ID, last))
				}
				s.lastItem[p] = it.ID
			}
			s.count += len(b.Items)
			return nil
		}
	}, batch.WithMaxBatchSize(max), batch.WithWorkers(4))

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; i < perProducer; {
				id := fmt.Sprint("B", (p+i)%ids)
				if i%7 == 0 {
					n := min(13, perProducer-i)
					items := make([]order, n)
					for k := range items {
						items[k] = order{ID: i + k, Amount: p}
					}
					if err := b.c.SendMany(ctx, id, items); err != nil {
						t.Error(err)
						return
					}
					i += n
					continue
				}
				if err := b.c.Send(ctx, batch.Data(id, order{ID: i, Amount: p})); err != nil {
					t.Error(err)
					return
				}
				i++
			}
		})
	}
	wg.Wait()
	for i := range ids {
		b.send(t, fmt.Sprint("B", i), nil, true)
	}
	b.shutdown(t)

	require.Empty(t, problems)
	require.False(t, b.rec.overlap, "a batch ID ran on two workers at once")
	total := 0
	for i := range ids {
		id := fmt.Sprint("B", i)
		o := b.outs.one(t, id)
		require.Equal(t, batch.Completed, o.Status)
		require.Equal(t, int64(state[id].count), o.Items)
		total += state[id].count
	}
	require.Equal(t, producers*perProducer, total, "every item exactly once")
	require.Equal(t, int64(total), b.c.Stats().ItemsProcessed)
}

// Producers racing Shutdown: every Send either succeeds or returns ErrClosed,
// and every item that was taken in is accounted for.
func TestSendRacingShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(16))
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	var warm sync.WaitGroup // done when every producer has sent a fair amount
	warm.Add(6)
	for p := range 6 {
		wg.Go(func() {
			id := fmt.Sprint("P", p)
			warmed := false
			defer func() {
				if !warmed {
					warm.Done()
				}
			}()
			send := func(m batch.Message[order]) bool {
				err := b.c.Send(context.Background(), m)
				if err != nil && err != batch.ErrClosed {
					t.Errorf("unexpected error %v", err)
				}
				return err == nil
			}
			for i := 0; ; i++ {
				if i == 2000 {
					warmed = true
					warm.Done()
				}
				if !send(batch.Data(id, order{ID: i})) {
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
				if i%50 == 49 && !send(batch.End[order](id)) {
					return
				}
			}
		})
	}
	warm.Wait()
	b.shutdown(t) // while the producers are still sending
	wg.Wait()
	s := b.c.Stats()
	require.Equal(t, int64(accepted), s.ItemsReceived, "every accepted item was taken in")
	require.Equal(t, s.ItemsReceived, s.ItemsProcessed+s.ItemsDiscarded, "and is processed or discarded")
	require.Zero(t, s.InFlight, "every batch has its outcome")
	require.Equal(t, int64(b.outs.count()), s.BatchesCompleted+s.BatchesIncomplete)
}
