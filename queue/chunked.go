package queue

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Chunked works a job as a stream of records cut into chunks, on sheaf's
// batch engine: the job ID is the batch ID, each chunk is one call to
// ProcessChunk (make it one transaction, or one append to a file), and the
// job is all-or-nothing.
//
// After every chunk the runner saves the job's progress and checks that the
// job is still its own: a cancelled or rescued job stops at the next chunk.
// Cleanup removes what a failed or cancelled attempt's chunks wrote, unless
// the job has passed to a later attempt (rescued, or put back by a Stop out
// of time), whose output it is. It also runs before any attempt after the
// first, to remove what an earlier one that crashed or lost the job left
// behind: it must be idempotent and cope with nothing to clean.
type Chunked[A Args, R any] interface {
	// Records returns how many records the job has and the records, in
	// order. The iterator's error ends the attempt with that error.
	Records(ctx context.Context, job *Job[A]) (total int64, records iter.Seq2[R, error], err error)
	// ProcessChunk writes one chunk. Chunks run in order, one at a time;
	// chunk.ID is the job ID, chunk.Seq counts from 1 and chunk.Offset is
	// the number of records before the chunk.
	ProcessChunk(ctx context.Context, job *Job[A], chunk batch.Batch[R]) error
	// Cleanup removes everything the job's chunks wrote.
	Cleanup(ctx context.Context, job *Job[A]) error
}

// ChunkFinisher is implemented by Chunked handlers that finish a job after
// its last chunk, such as renaming a temporary file into place. An error
// fails the attempt, and Cleanup runs.
type ChunkFinisher[A Args] interface {
	Finish(ctx context.Context, job *Job[A]) error
}

// RegisterChunked registers c as the handler of the kind named by A's Kind
// method. Besides Register's options it takes ChunkSize.
func RegisterChunked[A Args, R any](r *Registry, c Chunked[A, R], opts ...ChunkedOption) error {
	if c == nil {
		return check.Invalid("nil Chunked handler")
	}
	return register[A](r, true, opts, func(ctx context.Context, a *attempt, e *kindEntry) error {
		job, err := decodeJob[A](a.Row(), a)
		if err != nil {
			return err
		}
		ch := runner.Chunks[R]{
			Size:    e.Defaults.ChunkSize,
			Records: func(ctx context.Context) (int64, iter.Seq2[R, error], error) { return c.Records(ctx, job) },
			Process: func(ctx context.Context, b batch.Batch[R]) error { return c.ProcessChunk(ctx, job, b) },
			Cleanup: func(ctx context.Context) error { return c.Cleanup(ctx, job) },
			Done: func(ctx context.Context, d runner.ChunkDone) {
				a.Chunk(ctx, ChunkInfo{JobID: job.ID, Kind: job.Kind, Queue: job.Queue, Seq: d.Seq, Offset: d.Offset,
					Records: d.Records, Duration: d.Duration, Err: d.Err, Processed: d.Processed, Total: d.Total})
			},
		}
		if f, ok := c.(ChunkFinisher[A]); ok {
			ch.Finish = func(ctx context.Context) error { return f.Finish(ctx, job) }
		}
		return runner.RunChunked(ctx, a.Execution, ch)
	})
}

// Pages adapts a fetch-by-offset function to the records iterator of
// Chunked.Records: it calls fetch with offsets 0, size, 2×size, ... until a
// call returns fewer than size records, and yields them one by one.
func Pages[R any](ctx context.Context, size int, fetch func(ctx context.Context, offset, limit int) ([]R, error)) iter.Seq2[R, error] {
	return runner.Pages(ctx, size, fetch, check.Invalid("page size %d < 1", size))
}

// ChunkTimes is how long the chunks of a chunked job's latest attempt
// took, each measured around its ProcessChunk. The runner saves it with the
// job's progress after every chunk, in the same statement, so a job that
// slowed down midway shows it at no cost of its own; a new attempt starts
// without its predecessor's, and a job that is not chunked, or whose
// attempt has not finished a chunk, has none.
type ChunkTimes struct {
	// Count is the chunks timed; Min, Max and Sum cover them all.
	Count         int64
	Min, Max, Sum time.Duration
	// Recent are the latest chunks' durations, oldest first: at most
	// ChunkTimesKept.
	Recent []time.Duration
}

// ChunkTimesKept is how many of the latest chunks' durations ChunkTimes
// keeps.
const ChunkTimesKept = runner.ChunkTimesKept

// Mean is the average time a chunk took; 0 for none.
func (t ChunkTimes) Mean() time.Duration {
	if t.Count == 0 {
		return 0
	}
	return t.Sum / time.Duration(t.Count)
}

// ChunkTimes returns the chunk times of job id's latest attempt (see
// ChunkTimes), or ErrNotFound. It reads one column of one row.
func (c *ops) ChunkTimes(ctx context.Context, id int64) (ChunkTimes, error) {
	text, found, err := store.ChunkTimes(ctx, c.db, id)
	switch {
	case err != nil:
		return ChunkTimes{}, fmt.Errorf("queue: chunk times of %d: %w", id, err)
	case !found:
		return ChunkTimes{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	t, err := runner.ParseChunkTimes(text)
	return ChunkTimes(t), err
}
