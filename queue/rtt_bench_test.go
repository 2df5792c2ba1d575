package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// BenchmarkQueueRTT works b.N no-op jobs with one runner under default
// options whose connections to the server are direct (local), or go
// through a proxy that adds 50 ms or 200 ms to every round trip, as a
// server in another region would. The jobs are enqueued beforehand on a
// direct connection, and the runner has worked one job already, so that
// what is timed, from the enqueue's end until the last completion, is the
// working alone. It reports jobs/s, CPU per job, and, behind a proxy,
// x_local: jobs/s as a multiple of the local run's in the same process.
// A runner whose claims and completions paid a round trip per job would
// score next to nothing; one that pays it per batch, most of local.
func BenchmarkQueueRTT(b *testing.B) {
	pgtest.PostgresOnly(b, "the proxy stands in front of a PostgreSQL server")
	var local float64
	for _, rtt := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond} {
		name := "local"
		if rtt > 0 {
			name = "rtt" + rtt.String()
		}
		b.Run(name, func(b *testing.B) {
			var done atomic.Int64
			warm, finished := make(chan struct{}), make(chan struct{})
			counted := queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
				if ev.Type != queue.EventCompleted {
					return
				}
				switch done.Add(1) {
				case 1:
					close(warm)
				case int64(b.N) + 1:
					close(finished)
				}
			}))
			e := newEnvB(b, func(r *queue.Registry) {
				if err := queue.Register(r, nopHandler[noop]()); err != nil {
					b.Fatal(err)
				}
			})
			dsn := e.db.DSN
			if rtt > 0 {
				p := pgtest.NewProxy(b, e.db)
				p.Delay(rtt)
				dsn = p.DSN(dsn)
			}
			c, err := queue.NewClient(openSized(b, dsn), e.reg, quiet(), counted)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			r, err := queue.NewRunner(c)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := r.Stop(ctx); err != nil {
					b.Error(err)
				}
			}()
			enqueueNoops(b, e.client, 1)
			<-warm
			enqueueNoops(b, e.client, b.N)
			b.ResetTimer()
			cpu := pgtest.StartCPU(e.db)
			<-finished
			b.StopTimer()
			cpu.Stop().PerJob(b, b.N)
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "jobs/s")
			if rtt == 0 {
				local = rate
			} else if local > 0 {
				b.ReportMetric(rate/local, "x_local")
			}
		})
	}
}
