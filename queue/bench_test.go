package queue_test

import (
	"context"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// BenchmarkQueueThroughput inserts b.N no-op jobs with EnqueueBulk (reported
// as insert_jobs/s) and then works them with one runner under default options,
// reporting jobs/s from the runner's start until the last completion is
// committed.
func BenchmarkQueueThroughput(b *testing.B) {
	var done atomic.Int64
	finished := make(chan struct{})
	total := int64(b.N)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil })); err != nil {
			b.Fatal(err)
		}
	}, queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted && done.Add(1) == total {
			close(finished)
		}
	})))
	ctx := context.Background()
	jobs := make([]queue.Params, b.N)
	for i := range jobs {
		jobs[i] = queue.Params{Args: noop{}}
	}
	start := time.Now()
	if _, err := e.client.EnqueueBulk(ctx, jobs); err != nil {
		b.Fatal(err)
	}
	insert := time.Since(start)
	b.ResetTimer()
	r, err := queue.NewRunner(e.client)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-finished
	b.StopTimer()
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(b.N)/insert.Seconds(), "insert_jobs/s")
}

// BenchmarkQueuePickupLatency enqueues one job at a time into an idle runner
// and measures from just before Enqueue until the handler starts, reporting
// the median and 99th percentile.
func BenchmarkQueuePickupLatency(b *testing.B) {
	started := make(chan time.Time, 1)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error {
			started <- time.Now()
			return nil
		})); err != nil {
			b.Fatal(err)
		}
	})
	ctx := context.Background()
	r, err := queue.NewRunner(e.client)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := e.client.Enqueue(ctx, noop{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-started).Sub(t0))
	}
	b.StopTimer()
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99_ms")
}
