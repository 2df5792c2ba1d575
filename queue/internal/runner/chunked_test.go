package runner

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A chunked attempt runs its records in chunks of Size, in order, saving
// progress after each; one whose chunk fails is cleaned up and fails with
// the chunk's error.
func TestRunChunked(t *testing.T) {
	t.Parallel()
	st, db := newStore(t)
	type outcome struct {
		chunks   [][]int
		done     []ChunkDone
		cleanups int
		err      error
	}
	outcomes := make(chan outcome, 2)
	boom := errors.New("boom")
	work := func(failAt int) func(ctx context.Context, ex *Execution) error {
		return func(ctx context.Context, ex *Execution) error {
			var o outcome
			o.err = RunChunked(ctx, ex, Chunks[int]{
				Size: 2,
				Records: func(context.Context) (int64, iter.Seq2[int, error], error) {
					return 5, func(yield func(int, error) bool) {
						for i := range 5 {
							if !yield(i, nil) {
								return
							}
						}
					}, nil
				},
				Process: func(_ context.Context, b batch.Batch[int]) error {
					o.chunks = append(o.chunks, slices.Clone(b.Items))
					if b.Seq == failAt {
						return boom
					}
					return nil
				},
				Cleanup: func(context.Context) error { o.cleanups++; return nil },
				Done:    func(_ context.Context, d ChunkDone) { o.done = append(o.done, d) },
			})
			outcomes <- o
			return o.err
		}
	}
	cfg := config(kinds{"whole": {Work: work(0)}, "breaks": {Work: work(2)}})
	cfg.Store, cfg.DB, cfg.Workers = st, db, 1
	insert(t, st, db, store.NewJob{Kind: "whole", Queue: "q", Priority: 9, Attempts: 1, Payload: `{}`},
		store.NewJob{Kind: "breaks", Queue: "q", Priority: 1, Attempts: 1, Payload: `{}`})
	r := New(cfg)
	require.NoError(t, r.Start(context.Background()))
	whole, breaks := <-outcomes, <-outcomes
	stop(t, r)

	require.NoError(t, whole.err)
	require.Equal(t, [][]int{{0, 1}, {2, 3}, {4}}, whole.chunks)
	require.Zero(t, whole.cleanups)
	require.Len(t, whole.done, 3)
	require.Equal(t, ChunkDone{Seq: 3, Offset: 4, Records: 1, Processed: 5, Total: 5}, withoutDuration(whole.done[2]))

	// The chunk times are saved with the progress: three chunks, kept on the
	// job after it completed.
	var id int64
	require.NoError(t, db.Raw("SELECT id FROM sheaf_jobs WHERE kind = 'whole'").Scan(&id).Error)
	text, found, err := store.ChunkTimes(context.Background(), db, id)
	require.NoError(t, err)
	require.True(t, found)
	times, err := ParseChunkTimes(text)
	require.NoError(t, err)
	require.EqualValues(t, 3, times.Count)
	require.Len(t, times.Recent, 3)
	require.LessOrEqual(t, times.Min, times.Max)

	require.ErrorIs(t, breaks.err, boom)
	require.Equal(t, [][]int{{0, 1}, {2, 3}}, breaks.chunks)
	require.Equal(t, 1, breaks.cleanups)
	require.ErrorIs(t, breaks.done[1].Err, boom)
}

func withoutDuration(d ChunkDone) ChunkDone {
	d.Duration = 0
	return d
}

// ChunkTimes keeps the latest ChunkTimesKept durations and the count,
// shortest, longest and sum of all, and reads back what it writes.
func TestChunkTimes(t *testing.T) {
	t.Parallel()
	var c ChunkTimes
	for i := 1; i <= ChunkTimesKept+10; i++ {
		c.add(time.Duration(i) * time.Millisecond)
	}
	require.EqualValues(t, ChunkTimesKept+10, c.Count)
	require.Equal(t, time.Millisecond, c.Min)
	require.Equal(t, time.Duration(ChunkTimesKept+10)*time.Millisecond, c.Max)
	require.Len(t, c.Recent, ChunkTimesKept)
	require.Equal(t, 11*time.Millisecond, c.Recent[0])
	back, err := ParseChunkTimes(string(c.AppendText(nil)))
	require.NoError(t, err)
	require.Equal(t, c, back)

	none, err := ParseChunkTimes("")
	require.NoError(t, err)
	require.Zero(t, none.Count)
	for _, bad := range []string{"1 2", "1 2 3 x", "1 -2 3 4"} {
		_, err := ParseChunkTimes(bad)
		require.Error(t, err, bad)
	}
}
