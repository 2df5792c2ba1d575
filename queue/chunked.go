package queue

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// Chunked works a job as a stream of records cut into chunks, on sheaf's
// batch engine: the job ID is the batch ID, each chunk is one call to
// ProcessChunk (make it one transaction, or one append to a file), and the
// job is all-or-nothing.
//
// After every chunk the runner saves the job's progress and checks that the
// job is still its own: a cancelled or rescued job stops at the next chunk.
// When an attempt fails, or is cancelled, Cleanup removes what its chunks
// wrote, unless the job has already passed to a later attempt (the attempt
// lost its lease and the job was rescued, or a Stop that ran out of time
// put the job back): that attempt's output is not its to remove. Before any attempt after the first starts, Cleanup runs too, to
// remove what an earlier attempt that crashed or lost the job left behind;
// so Cleanup must be idempotent and cope with nothing to clean.
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
func RegisterChunked[A Args, R any](r *Registry, c Chunked[A, R], opts ...JobOption) error {
	if c == nil {
		return invalid("nil Chunked handler")
	}
	return register[A](r, true, opts, func(ctx context.Context, ex *execution, e *kindEntry) error {
		job, err := decodeJob[A](ex)
		if err != nil {
			return err
		}
		return runChunked(ctx, job, c, e.defaults.chunkSize)
	})
}

// chunkProcessor adapts a Chunked handler to the engine, saving progress
// after each chunk.
type chunkProcessor[A Args, R any] struct {
	job       *Job[A]
	c         Chunked[A, R]
	total     int64
	processed int64
}

func (p *chunkProcessor[A, R]) Process(ctx context.Context, b batch.Batch[R]) error {
	ex := p.job.exec
	if ex == nil || len(ex.r.cfg.hooks) == 0 {
		return p.process(ctx, b)
	}
	start := time.Now()
	err := p.process(ctx, b)
	chunkDone(ctx, ex, ChunkInfo{JobID: p.job.ID, Kind: p.job.Kind, Queue: p.job.Queue, Seq: b.Seq, Offset: b.Offset,
		Records: len(b.Items), Duration: time.Since(start), Err: err, Processed: p.processed, Total: p.total})
	return err
}

func (p *chunkProcessor[A, R]) process(ctx context.Context, b batch.Batch[R]) error {
	if err := p.c.ProcessChunk(ctx, p.job, b); err != nil {
		return err
	}
	p.processed += int64(len(b.Items))
	// Saving progress also tells whether the job is still ours: a cancelled
	// or rescued job fails here, and the engine cleans up.
	if err := p.job.SetProgress(ctx, p.processed, p.total); err != nil {
		return err
	}
	return context.Cause(ctx)
}

func (p *chunkProcessor[A, R]) AfterBatch(ctx context.Context, _ string) error {
	if f, ok := p.c.(ChunkFinisher[A]); ok {
		return f.Finish(ctx, p.job)
	}
	return nil
}

func runChunked[A Args, R any](ctx context.Context, job *Job[A], c Chunked[A, R], chunkSize int) error {
	if job.exec.mayHaveOutput() {
		// An earlier attempt may have died, or been stopped, without
		// cleaning up.
		if err := c.Cleanup(context.WithoutCancel(ctx), job); err != nil {
			return fmt.Errorf("queue: clean up before attempt %d: %w", job.Attempt, err)
		}
	}
	total, records, err := c.Records(ctx, job)
	if err != nil {
		return err
	}
	if err := job.SetProgress(ctx, 0, total); err != nil {
		return err
	}
	proc := &chunkProcessor[A, R]{job: job, c: c, total: total}
	var out batch.Outcome
	coord, err := batch.NewCoordinator[R](proc,
		batch.WithMaxBatchSize(chunkSize),
		batch.WithWorkers(1),
		batch.WithCleanup(cleanup.Func(func(ctx context.Context, _ string, _ int) error {
			if job.exec.movedOn(ctx) {
				return nil // see movedOn
			}
			return c.Cleanup(ctx, job)
		})),
		batch.WithObserver(func(o batch.Outcome) { out = o }),
		// The attempt's outcome, cleanup errors included, is logged by the
		// runner; the engine's own failure logs would say it twice.
		batch.WithLogger(nil),
	)
	if err != nil {
		return err
	}
	if err := coord.Start(ctx); err != nil {
		return err
	}
	id := strconv.FormatInt(job.ID, 10)
	feedErr := feed(ctx, coord, id, records, chunkSize)
	if feedErr == nil {
		feedErr = coord.Send(ctx, batch.End[R](id))
	}
	// Shutdown finishes or cleans up the batch; every outcome is in when it
	// returns. It is not given ctx: cleanup must run even when ctx is done.
	if err := coord.Shutdown(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	switch {
	case feedErr != nil:
		return joinCleanup(feedErr, out.CleanupErr)
	case out.Status == batch.Completed:
		return nil
	}
	cause := out.Err
	var pe *batch.ProcessError
	if errors.As(cause, &pe) {
		cause = pe.Err // the engine's wrapping names the job ID, which the job's logs already carry
	}
	return joinCleanup(cause, out.CleanupErr)
}

// feed sends the records to the engine in slices, so the engine's per-item
// cost stays low.
func feed[R any](ctx context.Context, coord *batch.Coordinator[R], id string, records iter.Seq2[R, error], size int) error {
	buf := make([]R, 0, min(size, 4096))
	for rec, err := range records {
		if err != nil {
			return fmt.Errorf("queue: reading records: %w", err)
		}
		buf = append(buf, rec)
		if len(buf) == cap(buf) {
			if err := coord.SendMany(ctx, id, buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if err := coord.SendMany(ctx, id, buf); err != nil {
		return err
	}
	return context.Cause(ctx)
}

func joinCleanup(err, cleanupErr error) error {
	if cleanupErr == nil {
		return err
	}
	return fmt.Errorf("%w (and cleaning up failed: %v)", err, cleanupErr)
}

// Pages adapts a fetch-by-offset function to the records iterator of
// Chunked.Records: it calls fetch with offsets 0, size, 2×size, ... until a
// call returns fewer than size records, and yields them one by one.
func Pages[R any](ctx context.Context, size int, fetch func(ctx context.Context, offset, limit int) ([]R, error)) iter.Seq2[R, error] {
	return func(yield func(R, error) bool) {
		if size < 1 {
			var zero R
			yield(zero, invalid("page size %d < 1", size))
			return
		}
		for offset := 0; ; offset += size {
			page, err := fetch(ctx, offset, size)
			if err != nil {
				var zero R
				yield(zero, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if len(page) < size {
				return
			}
		}
	}
}
