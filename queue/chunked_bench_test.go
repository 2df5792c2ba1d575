package queue_test

import (
	"context"
	"iter"
	"testing"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
)

// benchExport is a chunked kind of Records records whose chunks write
// nothing: what is timed is the runner's work around each chunk, the
// progress update after it above all.
type benchExport struct{ Records int64 }

func (benchExport) Kind() string { return "bench_export" }

type noopChunks struct{}

func (noopChunks) Records(_ context.Context, j *queue.Job[benchExport]) (int64, iter.Seq2[int, error], error) {
	return j.Args.Records, func(yield func(int, error) bool) {
		for i := range j.Args.Records {
			if !yield(int(i), nil) {
				return
			}
		}
	}, nil
}

func (noopChunks) ProcessChunk(context.Context, *queue.Job[benchExport], batch.Batch[int]) error {
	return nil
}

func (noopChunks) Cleanup(context.Context, *queue.Job[benchExport]) error { return nil }

// BenchmarkChunkedThroughput works one chunked job of b.N chunks of ten
// records each, with one runner under default options, and reports
// chunks/s from the runner's start until the job's completion is
// committed, and the CPU per chunk (cpu-us/job and server-cpu-us/job,
// a chunk being the unit here) of this process and the server's backends.
func BenchmarkChunkedThroughput(b *testing.B) {
	const size = 10
	completed, finished := countCompletions(1)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.RegisterChunked[benchExport, int](r, noopChunks{}, queue.ChunkSize(size)); err != nil {
			b.Fatal(err)
		}
	}, completed)
	if _, err := e.client.Enqueue(context.Background(), benchExport{Records: int64(b.N) * size}); err != nil {
		b.Fatal(err)
	}
	workAll(b, e.db, e.client, finished)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
}
