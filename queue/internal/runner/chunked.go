package runner

// Chunked jobs: an attempt as a stream of records cut into chunks, on the
// batch engine.

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

// Chunks is a chunked job's handler (see queue.Chunked) bound to its job,
// as RunChunked runs it.
type Chunks[R any] struct {
	Size    int // records per chunk
	Records func(ctx context.Context) (total int64, records iter.Seq2[R, error], err error)
	Process func(ctx context.Context, chunk batch.Batch[R]) error
	Finish  func(ctx context.Context) error // after the last chunk; nil for none
	Cleanup func(ctx context.Context) error
	Done    func(ctx context.Context, d ChunkDone) // after each chunk
}

// ChunkDone describes a chunk that was processed (see queue.ChunkInfo).
type ChunkDone struct {
	Seq       int
	Offset    int64
	Records   int
	Duration  time.Duration
	Err       error
	Processed int64
	Total     int64
}

// chunkProcessor adapts a Chunked handler to the engine, saving progress
// after each chunk.
type chunkProcessor[R any] struct {
	ex        *Execution
	c         Chunks[R]
	total     int64
	processed int64
	times     ChunkTimes
	text      []byte // times encoded, reused
}

func (p *chunkProcessor[R]) Process(ctx context.Context, b batch.Batch[R]) error {
	start := time.Now()
	err := p.process(ctx, b)
	p.c.Done(ctx, ChunkDone{Seq: b.Seq, Offset: b.Offset,
		Records: len(b.Items), Duration: time.Since(start), Err: err, Processed: p.processed, Total: p.total})
	return err
}

func (p *chunkProcessor[R]) process(ctx context.Context, b batch.Batch[R]) error {
	start := time.Now()
	if err := p.c.Process(ctx, b); err != nil {
		return err
	}
	p.times.add(time.Since(start))
	p.processed += int64(len(b.Items))
	p.text = p.times.AppendText(p.text[:0])
	// Saving progress also tells whether the job is still ours: a cancelled
	// or rescued job fails here, and the engine cleans up.
	if err := p.ex.setChunkProgress(ctx, p.processed, p.total, p.text); err != nil {
		return err
	}
	return context.Cause(ctx)
}

func (p *chunkProcessor[R]) AfterBatch(ctx context.Context, _ string) error {
	if p.c.Finish != nil {
		return p.c.Finish(ctx)
	}
	return nil
}

// RunChunked runs one attempt of a chunked job on the batch engine: the
// job ID is the batch ID, and the job is all-or-nothing. It saves the
// job's progress after every chunk, which also tells whether the job is
// still the attempt's; when the attempt fails it cleans up, unless the job
// has moved on to a later attempt (see Execution.MovedOn); and before an
// attempt after the first starts, it cleans up what an earlier one left.
func RunChunked[R any](ctx context.Context, ex *Execution, c Chunks[R]) error {
	chunkSize := c.Size
	if ex.MayHaveOutput() {
		// An earlier attempt may have died, or been stopped, without
		// cleaning up.
		if err := c.Cleanup(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("queue: clean up before attempt %d: %w", ex.row.Attempts, err)
		}
	}
	total, records, err := c.Records(ctx)
	if err != nil {
		return err
	}
	if err := ex.setChunkProgress(ctx, 0, total, nil); err != nil {
		return err
	}
	proc := &chunkProcessor[R]{ex: ex, c: c, total: total}
	var out batch.Outcome
	coord, err := batch.NewCoordinator[R](proc,
		batch.WithMaxBatchSize(chunkSize),
		batch.WithWorkers(1),
		batch.WithCleanup(cleanup.Func(func(ctx context.Context, _ string, _ int) error {
			if errors.Is(context.Cause(ex.ctx), ex.r.cfg.Errors.Stopping) {
				// Cut short by a stop out of time, which puts the job back
				// (or leaves it to be rescued): the next attempt cleans up
				// before it starts. The job may still be PROCESSING under
				// this claim, so MovedOn cannot tell; cleaning up now could
				// delete the next attempt's output, if it came first.
				return nil
			}
			if ex.MovedOn(ctx) {
				return nil // see MovedOn
			}
			return c.Cleanup(ctx)
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
	id := strconv.FormatInt(ex.row.ID, 10)
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

// Pages iterates over the records fetch returns a page of size at a time,
// until a page is short; a size below 1 yields badSize. It is queue.Pages.
func Pages[R any](ctx context.Context, size int, fetch func(ctx context.Context, offset, limit int) ([]R, error), badSize error) iter.Seq2[R, error] {
	return func(yield func(R, error) bool) {
		var zero R
		if size < 1 {
			yield(zero, badSize)
			return
		}
		for offset := 0; ; offset += size {
			page, err := fetch(ctx, offset, size)
			if err != nil {
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
