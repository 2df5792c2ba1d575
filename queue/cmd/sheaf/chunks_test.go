package main

import (
	"context"
	"encoding/json"
	"iter"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

type export struct{ Rows int64 }

func (export) Kind() string { return "export" }

// exporter goes through its rows in chunks of ten, 2ms a chunk.
type exporter struct{}

func (exporter) Records(_ context.Context, j *queue.Job[export]) (int64, iter.Seq2[int64, error], error) {
	return j.Args.Rows, func(yield func(int64, error) bool) {
		for i := range j.Args.Rows {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}

func (exporter) ProcessChunk(ctx context.Context, _ *queue.Job[export], _ batch.Batch[int64]) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Millisecond):
		return nil
	}
}

func (exporter) Cleanup(context.Context, *queue.Job[export]) error { return nil }

// A chunked job's chunks are counted and timed in `jobs get`, as on the
// console's job page, though the command does not know the kind; a job
// that is not chunked shows none.
func TestJobsGetShowsChunks(t *testing.T) {
	t.Parallel()
	url := "sqlite:" + filepath.Join(t.TempDir(), "jobs.db")
	db, err := sqlitedb.Open(url[len("sqlite:"):])
	require.NoError(t, err)
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		sqlDB.Close()
	})
	reg := queue.NewRegistry()
	require.NoError(t, queue.RegisterChunked[export, int64](reg, exporter{}, queue.ChunkSize(10)))
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
	c, err := queue.NewClient(db, reg, queue.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Migrate(ctx))
	chunked, err := c.Enqueue(ctx, export{Rows: 95})
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, report{County: "Travis"})
	require.NoError(t, err)
	r, err := queue.NewRunner(c, queue.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = c.Wait(wait, chunked.Job.ID, plain.Job.ID)
	require.NoError(t, err)
	require.NoError(t, r.Stop(ctx))

	out := sheaf(t, nil, "jobs", "get", strconv.FormatInt(chunked.Job.ID, 10), "-db", url)
	require.Equal(t, 0, out.code, out.stderr)
	require.Regexp(t, `Progress\s+95 of 95\n`, out.stdout)
	require.Regexp(t, `Chunks\s+10 done in the latest attempt, \d[.\dµm]*s on average, fastest \d[.\dµm]*s, slowest \d[.\dµm]*s\n`, out.stdout)
	times := regexp.MustCompile(`Chunk times\s+chunks 1 to 10, oldest first: (.*)\n`).FindStringSubmatch(out.stdout)
	require.Len(t, times, 2, out.stdout)
	require.Len(t, regexp.MustCompile(`\S+`).FindAllString(times[1], -1), 10)

	out = sheaf(t, nil, "jobs", "get", strconv.FormatInt(chunked.Job.ID, 10), "-json", "-db", url)
	require.Equal(t, 0, out.code, out.stderr)
	var v struct {
		Progress struct {
			ChunkTimes struct {
				Count         int64     `json:"count"`
				MinSeconds    float64   `json:"min_seconds"`
				RecentSeconds []float64 `json:"recent_seconds"`
			} `json:"chunk_times"`
		} `json:"progress"`
	}
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &v))
	require.EqualValues(t, 10, v.Progress.ChunkTimes.Count)
	require.Len(t, v.Progress.ChunkTimes.RecentSeconds, 10)
	require.GreaterOrEqual(t, v.Progress.ChunkTimes.MinSeconds, 0.002, "each chunk took at least its 2ms")

	out = sheaf(t, nil, "jobs", "get", strconv.FormatInt(plain.Job.ID, 10), "-db", url)
	require.Equal(t, 0, out.code, out.stderr)
	require.NotContains(t, out.stdout, "Chunk")
	out = sheaf(t, nil, "jobs", "get", strconv.FormatInt(plain.Job.ID, 10), "-json", "-db", url)
	require.NotContains(t, out.stdout, "chunk_times")
}
