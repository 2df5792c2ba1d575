package queue_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

type countyReport struct {
	County  string `json:"county"`
	Records int    `json:"records"`
}

func (countyReport) Kind() string { return "county_report" }

// reportWriter is a chunked handler that writes each chunk's records to
// report_rows in one transaction. Hooks let tests fail, block or observe.
type reportWriter struct {
	db *gorm.DB

	mu        sync.Mutex
	chunks    []batch.Batch[int] // as processed
	progress  []int64            // the job's saved progress when each chunk began
	cleanups  int
	finished  int
	onChunk   func(ctx context.Context, job *queue.Job[countyReport], chunk batch.Batch[int]) error
	onCleanup func(ctx context.Context, job *queue.Job[countyReport]) error
	recordErr error
	finishErr error
}

func (w *reportWriter) Records(_ context.Context, job *queue.Job[countyReport]) (int64, iter.Seq2[int, error], error) {
	n := job.Args.Records
	return int64(n), func(yield func(int, error) bool) {
		for i := range n {
			if w.recordErr != nil && i == n/2 {
				yield(0, w.recordErr)
				return
			}
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}

func (w *reportWriter) ProcessChunk(ctx context.Context, job *queue.Job[countyReport], chunk batch.Batch[int]) error {
	var saved int64
	if err := w.db.Raw("SELECT processed FROM sheaf_jobs WHERE id = ?", job.ID).Scan(&saved).Error; err != nil {
		return err
	}
	w.mu.Lock()
	w.chunks = append(w.chunks, batch.Batch[int]{ID: chunk.ID, Seq: chunk.Seq, Offset: chunk.Offset, Items: append([]int(nil), chunk.Items...)})
	w.progress = append(w.progress, saved)
	onChunk := w.onChunk
	w.mu.Unlock()
	if onChunk != nil {
		if err := onChunk(ctx, job, chunk); err != nil {
			return err
		}
	}
	return w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Table("report_rows").Create(reportRows(job.ID, chunk.Items)).Error
	})
}

// reportRows are the rows of report_rows that job id's records ns make.
func reportRows(id int64, ns []int) []map[string]any {
	rows := make([]map[string]any, len(ns))
	for i, n := range ns {
		rows[i] = map[string]any{"job_id": id, "n": n}
	}
	return rows
}

func (w *reportWriter) Cleanup(ctx context.Context, job *queue.Job[countyReport]) error {
	w.mu.Lock()
	w.cleanups++
	onCleanup := w.onCleanup
	w.mu.Unlock()
	if onCleanup != nil {
		if err := onCleanup(ctx, job); err != nil {
			return err
		}
	}
	return w.db.WithContext(ctx).Exec("DELETE FROM report_rows WHERE job_id = ?", job.ID).Error
}

func (w *reportWriter) Finish(_ context.Context, _ *queue.Job[countyReport]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished++
	return w.finishErr
}

func chunkedEnv(t *testing.T, w *reportWriter, opts ...queue.ChunkedOption) *env {
	t.Helper()
	e := newEnv(t, func(r *queue.Registry) {})
	require.NoError(t, e.db.Gorm.Exec(`CREATE TABLE report_rows (job_id bigint NOT NULL, n int NOT NULL, UNIQUE (job_id, n))`).Error)
	w.db = e.db.Gorm
	require.NoError(t, queue.RegisterChunked[countyReport, int](e.reg, w, append([]queue.ChunkedOption{queue.ChunkSize(1000)}, opts...)...))
	return e
}

func (e *env) outputRows(t *testing.T, id int64) int64 {
	t.Helper()
	return e.db.Count(t, "SELECT count(*) FROM report_rows WHERE job_id = ?", id)
}

func TestChunkedJobWritesEveryRecordWithProgress(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{County: "Travis", Records: 2500})
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	require.Equal(t, int64(2500), e.outputRows(t, id))
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, int64(2500), rec.Processed)
	require.Equal(t, int64(2500), *rec.Total)
	require.Len(t, w.chunks, 3)
	for i, c := range w.chunks {
		require.Equal(t, i+1, c.Seq)
		require.Equal(t, int64(i*1000), c.Offset)
		require.Equal(t, int64(i*1000), w.progress[i], "progress was saved after the previous chunk")
	}
	require.Len(t, w.chunks[2].Items, 500)
	require.Equal(t, 1, w.finished)
	require.Zero(t, w.cleanups)

	times, err := e.client.ChunkTimes(context.Background(), id)
	require.NoError(t, err)
	require.EqualValues(t, 3, times.Count)
	require.Len(t, times.Recent, 3)
	require.Equal(t, slices.Max(times.Recent), times.Max)
	require.Equal(t, slices.Min(times.Recent), times.Min)
	require.Equal(t, times.Recent[0]+times.Recent[1]+times.Recent[2], times.Sum)
	_, err = e.client.ChunkTimes(context.Background(), id+1000)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

func TestChunkedFailureCleansUpAndTheRetryWritesOnce(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	failed := false
	// The retry is due at once: its first chunk waits until the rows the
	// failed attempt left have been counted, so that the count is not of
	// the retry's own rows.
	counted := make(chan struct{})
	w.onChunk = func(ctx context.Context, job *queue.Job[countyReport], chunk batch.Batch[int]) error {
		if job.Attempt == 1 && chunk.Seq == 3 && !failed {
			failed = true
			return errors.New("disk full")
		}
		if job.Attempt == 2 && chunk.Seq == 1 {
			select {
			case <-counted:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	e := chunkedEnv(t, w, queue.RetryBackoff(queue.Delays{0}))
	var rowsAfterFailure int64 = -1
	e.events = queuetest.NewEvents()
	id := enqueue(t, e, countyReport{Records: 4200})
	e.runner(t, queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventRetrying { // no require here: this is a runner goroutine
			if err := e.db.Gorm.Raw("SELECT count(*) FROM report_rows WHERE job_id = ?", ev.JobID).Scan(&rowsAfterFailure).Error; err != nil {
				t.Error(err)
			}
			close(counted)
		}
		e.events.Observe(ev)
	})))
	retry := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.EqualError(t, retry.Err, "disk full")
	e.events.Wait(t, queue.EventCompleted, id, 1)
	require.Zero(t, rowsAfterFailure, "the failed attempt's two chunks were cleaned up")
	require.Equal(t, int64(4200), e.outputRows(t, id), "the retry wrote every record, once")
	require.Equal(t, 2, w.cleanups, "after the failure, and again before the retry in case a crash left output")
	times, err := e.client.ChunkTimes(context.Background(), id)
	require.NoError(t, err)
	require.EqualValues(t, 5, times.Count, "the retry's chunks only: an attempt starts without the failed one's")
}

func TestChunkedCancelMidRunCleansUp(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	inChunk2 := make(chan struct{})
	w.onChunk = func(ctx context.Context, _ *queue.Job[countyReport], chunk batch.Batch[int]) error {
		if chunk.Seq == 2 {
			close(inChunk2)
			<-ctx.Done() // a long chunk that honours its context
			return ctx.Err()
		}
		return nil
	}
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 5000})
	e.runner(t)
	<-inChunk2
	require.Equal(t, int64(1000), e.outputRows(t, id), "chunk 1 is written")
	_, err := e.client.Cancel(context.Background(), id)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventCancelled, id, 1)
	require.Zero(t, e.outputRows(t, id), "cancelled: its partial output is gone")
	require.Equal(t, queue.StatusCancelled, e.status(t, id))
	require.Len(t, w.chunks, 2, "no chunk after the cancellation")
}

// A cancellation the runner is not told about is noticed at the next chunk,
// when saving progress finds the job no longer this runner's.
func TestChunkedUnnotifiedCancelStopsAtTheNextChunk(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	var e *env
	w.onChunk = func(_ context.Context, job *queue.Job[countyReport], chunk batch.Batch[int]) error {
		if chunk.Seq == 2 {
			return e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'CANCELLED' WHERE id = ?", job.ID).Error
		}
		return nil
	}
	e = chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 5000})
	e.runner(t)
	e.events.Wait(t, queue.EventRejected, id, 1)
	require.Len(t, w.chunks, 2)
	require.Zero(t, e.outputRows(t, id))
	require.Equal(t, queue.StatusCancelled, e.status(t, id))
}

// An attempt that died with its process left output behind; the next attempt
// removes it before it starts.
func TestChunkedRetryAfterACrashCleansFirst(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 1500})
	// What a first attempt that died with its process leaves once it is
	// rescued: its first chunk written, its total saved, its claim made,
	// its attempt uncounted, the job a suspect.
	first := make([]int, 1000)
	for i := range first {
		first[i] = i
	}
	require.NoError(t, e.db.Gorm.Table("report_rows").Create(reportRows(id, first)).Error)
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET claims = 1, rescues = 1, total = 1500 WHERE id = ?", id).Error)
	e.runner(t)
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, int64(1500), e.outputRows(t, id), "no leftovers, no duplicates (the table would have refused them)")
	require.Equal(t, 1, w.cleanups)
}

// An attempt that lost its job to a rescue must not clean up when it
// finally fails: by then the output is the next attempt's.
func TestChunkedAttemptThatLostTheJobLeavesTheNextAttemptsOutput(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	inChunk2, release := make(chan struct{}), make(chan struct{})
	w.onChunk = func(_ context.Context, job *queue.Job[countyReport], chunk batch.Batch[int]) error {
		if job.Attempt == 1 && chunk.Seq == 2 {
			close(inChunk2)
			<-release // hung, as a runner cut off from the database would be
		}
		return nil
	}
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 1500})
	e.runner(t)
	<-inChunk2
	// What the rescuer does once the hung attempt's lease has expired.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'QUEUED', locked_until = NULL, locked_by = NULL WHERE id = ?", id).Error)
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, int64(1500), e.outputRows(t, id))
	close(release) // attempt 1 goes on, fails on rows attempt 2 wrote, and is refused
	e.events.Wait(t, queue.EventRejected, id, 1)
	require.Equal(t, int64(1500), e.outputRows(t, id), "the late attempt left the completed attempt's output alone")
	require.Equal(t, queue.StatusCompleted, e.status(t, id))
}

// A Stop that runs out of time cancels a chunked attempt and puts its job
// back in the queue at once, without waiting for it. The attempt, finding
// its job gone, leaves its output alone; the next attempt, though its
// number is 1 again, cleans up before it starts.
func TestChunkedStopOutOfTimeLeavesTheCleanupToTheNextAttempt(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	inChunk2, putBack := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	w.onChunk = func(ctx context.Context, _ *queue.Job[countyReport], chunk batch.Batch[int]) error {
		if chunk.Seq == 2 && blocked.CompareAndSwap(false, true) {
			close(inChunk2)
			<-ctx.Done() // a long chunk that honours its context, once the job is back
			<-putBack
			return ctx.Err()
		}
		return nil
	}
	var e *env
	var mu sync.Mutex
	var statuses []queue.Status // the job's status at each cleanup
	w.onCleanup = func(_ context.Context, job *queue.Job[countyReport]) error {
		var st queue.Status
		if err := e.db.Gorm.Raw("SELECT status FROM sheaf_jobs WHERE id = ?", job.ID).Scan(&st).Error; err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, st)
		return nil
	}
	cleanups := func() []queue.Status {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(statuses)
	}
	e = chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 1500})
	r, err := queue.NewRunner(e.client)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-inChunk2
	stopOutOfTime(t, r, stopDeadline)
	requirePutBack(t, e, id)
	close(putBack)
	<-r.Done()
	require.Empty(t, cleanups(), "the stopped attempt left the output alone")
	require.Equal(t, int64(1000), e.outputRows(t, id), "chunk 1 is left behind")

	e.runner(t)
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, []queue.Status{queue.StatusProcessing}, cleanups(), "the next attempt cleaned up first")
	require.Equal(t, int64(1500), e.outputRows(t, id))
}

func TestChunkedFinishAndRecordErrors(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]*reportWriter{
		"finish": {finishErr: errors.New("rename failed")},
		"source": {recordErr: errors.New("source went away")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := chunkedEnv(t, w, queue.MaxAttempts(1))
			id := enqueue(t, e, countyReport{Records: 2500})
			e.runner(t)
			ev := e.events.Wait(t, queue.EventFailed, id, 1)[0]
			if name == "finish" {
				require.ErrorContains(t, ev.Err, "rename failed")
			} else {
				require.ErrorContains(t, ev.Err, "source went away")
			}
			require.Zero(t, e.outputRows(t, id), "cleaned up")
			if name == "finish" {
				require.Equal(t, 1, w.cleanups, "every chunk was written, so cleanup ran")
			} // else the first chunk may not have been written when the source failed
			require.LessOrEqual(t, w.cleanups, 1)
		})
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := make([]int, 25)
	for i := range data {
		data[i] = i
	}
	var calls []int
	fetch := func(_ context.Context, offset, limit int) ([]int, error) {
		calls = append(calls, offset)
		return data[min(offset, len(data)):min(offset+limit, len(data))], nil
	}
	var got []int
	for v, err := range queue.Pages(ctx, 10, fetch) {
		require.NoError(t, err)
		got = append(got, v)
	}
	require.Equal(t, data, got)
	require.Equal(t, []int{0, 10, 20}, calls, "stops at the short page")

	boom := errors.New("boom")
	var errs []error
	for _, err := range queue.Pages(ctx, 10, func(context.Context, int, int) ([]int, error) { return nil, boom }) {
		errs = append(errs, err)
	}
	require.Equal(t, []error{boom}, errs)
	for _, err := range queue.Pages(ctx, 0, fetch) {
		require.ErrorIs(t, err, queue.ErrInvalidOption)
	}
	for v := range queue.Pages(ctx, 10, fetch) {
		if v == 3 {
			break // the iterator stops when asked
		}
	}
}

// A chunked kind's chunk size is its option's, or DefaultChunkSize; other
// kinds have none.
func TestRegistryChunkSize(t *testing.T) {
	r := queue.NewRegistry()
	require.NoError(t, queue.RegisterChunked[countyReport, int](r, &reportWriter{}, queue.ChunkSize(7)))
	require.NoError(t, queue.RegisterChunked[txJob, int](r, &oneChunk{}))
	require.NoError(t, queue.Register(r, nopHandler[noop]()))
	for kind, want := range map[string]int{countyReport{}.Kind(): 7, txJob{}.Kind(): queue.DefaultChunkSize, noop{}.Kind(): 0, "unknown": 0} {
		size, ok := r.ChunkSize(kind)
		require.Equal(t, want, size, kind)
		require.Equal(t, want > 0, ok, kind)
	}
}
