package bridge_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
)

// lagBroker acknowledges everything and keeps how long after its change
// each event arrived.
type lagBroker struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (l *lagBroker) Publish(_ context.Context, msgs []bridge.Message) []error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		// The event's time, without decoding the rest.
		if i := bytes.Index(m.Value, []byte(`"time":"`)); i >= 0 {
			end := bytes.IndexByte(m.Value[i+8:], '"')
			if at, err := time.Parse(time.RFC3339Nano, string(m.Value[i+8:i+8+end])); err == nil {
				l.lags = append(l.lags, now.Sub(at))
			}
		}
	}
	return nil
}

// p99 returns the 99th percentile of the lags and forgets them.
func (l *lagBroker) p99() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lags) == 0 {
		return 0
	}
	slices.Sort(l.lags)
	p := l.lags[len(l.lags)*99/100]
	l.lags = l.lags[:0]
	return p
}

// benchQueue is a queue with its own runner, which counts completions.
type benchQueue struct {
	client *queue.Client
	done   atomic.Int64
	spent  time.Duration
	jobs   int
}

func newBenchQueue(b *testing.B, relay func(*queue.Client) *bridge.Relay) *benchQueue {
	q := &benchQueue{}
	db := pgtest.NewDB(b)
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	var err error
	if q.client, err = queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet())); err != nil {
		b.Fatal(err)
	}
	if err := q.client.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	opts := []queue.RunnerOption{queue.WithLogger(quiet()), queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted {
			q.done.Add(1)
		}
	}))}
	if relay != nil {
		if err := bridge.Enable(context.Background(), q.client); err != nil {
			b.Fatal(err)
		}
		opts = append(opts, queue.WithMaintenance(relay(q.client)))
	}
	r, err := queue.NewRunner(q.client, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := r.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return q
}

// round enqueues n jobs and waits until the runner has completed them.
func (q *benchQueue) round(b *testing.B, n int) {
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: report{}}
	}
	target := q.done.Load() + int64(n)
	start := time.Now()
	if _, err := q.client.EnqueueMany(context.Background(), jobs); err != nil {
		b.Fatal(err)
	}
	for q.done.Load() < target {
		time.Sleep(time.Millisecond) // a benchmark's poll of a counter
	}
	q.spent += time.Since(start)
	q.jobs += n
}

func (q *benchQueue) rate() float64 { return float64(q.jobs) / q.spent.Seconds() }

// BenchmarkBridgeCost works rounds of SHEAF_BENCH_JOBS jobs (default 5000)
// on three queues, each with its own database and runner, in turn: two
// with the outbox off (the second a control of the noise between two
// alike) and one with it on and a relay publishing to a broker that only
// acknowledges. It reports each one's jobs/s (enqueue to the last
// completion), the ratios to the first, and the p99 of how long after its
// change an event reached the broker. SHEAF_BENCH_BATCH sets the relay's
// batch.
func BenchmarkBridgeCost(b *testing.B) {
	n := envInt("SHEAF_BENCH_JOBS", 5000)
	lag := &lagBroker{}
	off, control := newBenchQueue(b, nil), newBenchQueue(b, nil)
	on := newBenchQueue(b, func(c *queue.Client) *bridge.Relay {
		r, err := bridge.NewRelay(c, lag, bridge.WithLogger(quiet()), bridge.WithBatch(envInt("SHEAF_BENCH_BATCH", bridge.DefaultBatch)))
		if err != nil {
			b.Fatal(err)
		}
		return r
	})
	qs := []*benchQueue{off, control, on}
	for i := range b.N {
		for j := range qs {
			qs[(i+j)%len(qs)].round(b, n)
		}
	}
	b.ReportMetric(off.rate(), "off_jobs/s")
	b.ReportMetric(on.rate(), "on_jobs/s")
	b.ReportMetric(control.rate()/off.rate(), "control/off")
	b.ReportMetric(on.rate()/off.rate(), "on/off")
	b.ReportMetric(float64(lag.p99().Microseconds())/1000, "p99_delivery_ms")
}

// envInt is the number environment variable name holds, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
