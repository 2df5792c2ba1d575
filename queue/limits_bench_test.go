package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// BenchmarkQueueThroughputUnboundLimit is BenchmarkQueueThroughput with a
// limit on the kind that never binds (a million running at once): the
// cost of claiming within a limit, as jobs/s beside the unlimited run's.
func BenchmarkQueueThroughputUnboundLimit(b *testing.B) {
	completed, finished := countCompletions(b.N)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil }),
			queue.KindLimit(queue.Limits{Concurrency: 1_000_000})); err != nil {
			b.Fatal(err)
		}
	}, completed)
	enqueueNoops(b, e.client, b.N)
	workAll(b, e.db, e.client, finished)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkLimitCost works b.N no-op jobs with one runner of default
// options three ways, in alternating rounds in the same run: under no
// limit (none), under a kind limit that never binds, a million at once
// (unbound), and under one that does, 20 of the runner's 100 workers
// (bound). It reports each one's jobs/s, and the unbound and bound rates
// as multiples of none's (x_none).
func BenchmarkLimitCost(b *testing.B) {
	ways := []struct {
		name string
		opts []queue.RegisterOption
	}{
		{"none", nil},
		{"unbound", []queue.RegisterOption{queue.KindLimit(queue.Limits{Concurrency: 1_000_000})}},
		{"bound", []queue.RegisterOption{queue.KindLimit(queue.Limits{Concurrency: 20})}},
	}
	took := make([]time.Duration, len(ways))
	b.StopTimer()
	for range 2 {
		for i, w := range ways {
			took[i] += timeWork(b, w.opts...)
		}
	}
	for i, w := range ways {
		rate := float64(2*b.N) / took[i].Seconds()
		b.ReportMetric(rate, w.name+"_jobs/s")
		if i > 0 {
			b.ReportMetric(took[0].Seconds()/took[i].Seconds(), w.name+"_x_none")
		}
	}
}

// timeWork enqueues b.N no-op jobs of a kind registered with opts and
// returns how long a runner with default options takes to complete them,
// from its start until the last completion is committed.
func timeWork(b *testing.B, opts ...queue.RegisterOption) time.Duration {
	completed, finished := countCompletions(b.N)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil }), opts...); err != nil {
			b.Fatal(err)
		}
	}, completed)
	enqueueNoops(b, e.client, b.N)
	ctx := context.Background()
	r, err := queue.NewRunner(e.client)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	b.StartTimer()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-finished
	b.StopTimer()
	took := time.Since(start)
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	return took
}

// BenchmarkLimitUtilisation works jobs of 20 and 200 ms under a limit of
// four running at once with two runners of four workers each, and reports
// how much of the limit the handlers used over the run: the time they ran,
// over four times the run's length, in percent. What they leave unused is
// the time between a handler's end and the next one's start: its
// completion's statement, then a claim.
func BenchmarkLimitUtilisation(b *testing.B) {
	for _, job := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		b.Run(fmt.Sprint("job=", job), func(b *testing.B) { benchmarkUtilisation(b, job) })
	}
}

func benchmarkUtilisation(b *testing.B, job time.Duration) {
	const n = 4
	var l spanLedger
	completed, finished := countCompletions(b.N)
	e := newEnvB(b, registerLimited(&l, queue.KindLimit(queue.Limits{Concurrency: n})), completed)
	jobs := make([]queue.Params, b.N)
	for i := range jobs {
		jobs[i] = queue.Params{Args: limitedJob{Ms: int(job / time.Millisecond)}}
	}
	if _, err := e.client.EnqueueBulk(context.Background(), jobs); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	var runners []*queue.Runner
	for i := range 2 {
		r, err := queue.NewRunner(e.client, queue.WithRunnerID(fmt.Sprint("u", i)), queue.WithWorkers(4))
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			b.Fatal(err)
		}
		runners = append(runners, r)
	}
	<-finished
	b.StopTimer()
	for _, r := range runners {
		if err := r.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
	all := l.list()
	if most := maxRunning(all, ""); most > n {
		b.Fatalf("%d ran at once under a limit of %d", most, n)
	}
	first, last := all[0].start, all[0].end
	var busy time.Duration
	for _, s := range all {
		busy += s.end.Sub(s.start)
		first, last = minTime(first, s.start), maxTime(last, s.end)
	}
	b.ReportMetric(100*busy.Seconds()/(n*last.Sub(first).Seconds()), "utilisation_%")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
