package queue

import (
	"context"
	"testing"
)

type benchArgs struct {
	County string            `json:"county"`
	Date   string            `json:"date"`
	Format string            `json:"format"`
	Tags   map[string]string `json:"tags"`
}

func (benchArgs) Kind() string { return "bench" }

type benchNoop struct{}

func (benchNoop) Kind() string { return "bench_noop" }

// BenchmarkPrepare measures what a job costs before any statement: encoding
// and every check, for the no-op jobs of BenchmarkQueueThroughput and for a
// job with a few strings, options and claims.
func BenchmarkPrepare(b *testing.B) {
	reg := NewRegistry()
	h := func(context.Context, *Job[benchArgs]) error { return nil }
	if err := Register(reg, HandlerFunc[benchArgs](h)); err != nil {
		b.Fatal(err)
	}
	if err := Register(reg, HandlerFunc[benchNoop](func(context.Context, *Job[benchNoop]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	c := &Client{ops{reg: reg}}
	report := Params{
		Args: benchArgs{County: "Travis", Date: "2025-12-08", Format: "csv", Tags: map[string]string{"team": "Ops – Austin"}},
		Options: []EnqueueOption{CorrelationID("req-4f1c2a"), IdempotencyKey("travis-2025-12-08"),
			AuthContext(Auth{"sub": "user-17", "role": "SUPERVISOR", "counties": []any{"Travis", "Hays"}})},
	}
	for name, p := range map[string]Params{"noop": {Args: benchNoop{}}, "report": report} {
		b.Run(name, func(b *testing.B) {
			jobs := make([]Params, 1000)
			for i := range jobs {
				jobs[i] = p
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.prepareAll(jobs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
