package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// benchQueue is the queue of the benchmark's jobs, apart from the
// program's.
const benchQueue = "sheaf_bench"

// benchNoop is the benchmark's job: it does nothing, so what is measured
// is the queue's own cost per job.
type benchNoop struct{}

func (benchNoop) Kind() string { return "sheaf_bench_noop" }

func runBench(ctx context.Context, e *env, args []string) error {
	fs, dsn := e.flags("bench", "[flags]", `Measures the queue on the database: inserts -jobs no-op jobs in one bulk (COPY on
PostgreSQL), then works them with one runner of -workers workers, and prints both
rates. The jobs go to the queue `+benchQueue+`, and stay COMPLETED until retention
prunes them: use a scratch database or schema. The schema is migrated first.`)
	jobs := fs.Int("jobs", 10_000, "jobs to insert and work (1 to 1000000)")
	workers := fs.Int("workers", 100, "the runner's workers")
	if err := e.parseNone(fs, args); err != nil {
		return err
	}
	if *jobs < 1 || *jobs > 1_000_000 {
		return usageError("bench: -jobs %d: want 1 to 1000000", *jobs)
	}
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[benchNoop](func(context.Context, *queue.Job[benchNoop]) error { return nil }),
		queue.OnQueue(benchQueue)); err != nil {
		return err
	}
	client, db, closeDB, err := e.open(ctx, *dsn, true, reg)
	if err != nil {
		return err
	}
	defer closeDB()
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(*workers + 8) // the runner's own connections and the handlers'
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	params := make([]queue.Params, *jobs)
	for i := range params {
		params[i] = queue.Params{Args: benchNoop{}}
	}
	start := time.Now()
	n, err := client.EnqueueBulk(ctx, params)
	if err != nil {
		return err
	}
	inserted := time.Since(start)
	fmt.Fprintf(e.stdout, "inserted %d jobs in %v: %.0f jobs/s\n", n, inserted.Round(time.Millisecond), float64(n)/inserted.Seconds())

	r, err := queue.NewRunner(client, queue.WithWorkers(*workers), queue.WithQueues(benchQueue))
	if err != nil {
		return err
	}
	start = time.Now()
	if err := r.Start(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for r.Stats().Completed < n && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	worked := time.Since(start)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.Stop(stop); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted after %d of %d jobs", r.Stats().Completed, n)
	}
	fmt.Fprintf(e.stdout, "worked %d jobs with %d workers in %v: %.0f jobs/s\n", n, *workers, worked.Round(time.Millisecond), float64(n)/worked.Seconds())
	return nil
}
