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
	mu    sync.Mutex
	lags  []time.Duration
	calls int
}

func (l *lagBroker) Publish(_ context.Context, msgs []bridge.Message) []error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
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

// quantile returns the q-quantile of the lags, and how many there are.
func (l *lagBroker) quantile(q float64) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lags) == 0 {
		return 0, 0
	}
	slices.Sort(l.lags)
	return l.lags[int(float64(len(l.lags)-1)*q)], len(l.lags)
}

// count returns how many lags there are.
func (l *lagBroker) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lags)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchQueue is a queue with its own runner, which counts completions.
type benchQueue struct {
	client *queue.Client
	db     *pgtest.DB
	done   atomic.Int64
	spent  time.Duration
	cpu    pgtest.CPU // of the queue's rounds
	jobs   int
	rates  []float64 // jobs/s of each round
}

func newBenchQueue(b *testing.B, relay func(*queue.Client) *bridge.Relay) *benchQueue {
	db := pgtest.NewDB(b)
	q := &benchQueue{db: db}
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
	// The meter starts before the clock: its first look at the server's
	// backends is no part of the round.
	cpu := pgtest.StartCPU(q.db)
	start := time.Now()
	if _, err := q.client.EnqueueMany(context.Background(), jobs); err != nil {
		b.Fatal(err)
	}
	for q.done.Load() < target {
		time.Sleep(time.Millisecond) // a benchmark's poll of a counter
	}
	spent := time.Since(start)
	q.spent += spent
	c := cpu.Stop()
	q.cpu.Process, q.cpu.Server, q.cpu.Known = q.cpu.Process+c.Process, q.cpu.Server+c.Server, c.Known
	q.jobs += n
	q.rates = append(q.rates, float64(n)/spent.Seconds())
}

func (q *benchQueue) rate() float64 { return float64(q.jobs) / q.spent.Seconds() }

// cpuUS is the CPU time per job of q's rounds, in microseconds: of this
// process (the runners and the relay), and of the database's backends that
// served q (0 when unknown).
func (q *benchQueue) cpuUS() (process, server float64) {
	return float64(q.cpu.Process.Microseconds()) / float64(q.jobs), float64(q.cpu.Server.Microseconds()) / float64(q.jobs)
}

// medianRatio is the median of the ratios of q's rounds' rates to base's,
// each round to the one of the same turn, so that a drift of the machine's
// load over the run weighs on both sides of each ratio alike.
func medianRatio(q, base *benchQueue) float64 {
	r := make([]float64, min(len(q.rates), len(base.rates)))
	for i := range r {
		r[i] = q.rates[i] / base.rates[i]
	}
	slices.Sort(r)
	if len(r) == 0 {
		return 0
	}
	if len(r)%2 == 0 {
		return (r[len(r)/2-1] + r[len(r)/2]) / 2
	}
	return r[len(r)/2]
}

// BenchmarkBridgeCost works rounds of SHEAF_BENCH_JOBS jobs (default 5000)
// on three queues, each with its own database and runner, in turn (b.N
// rounds each, the order rotating): two with the outbox off (the second a
// control of the noise between two alike) and one with it on and a relay
// publishing to a broker that only acknowledges. It reports the jobs/s
// (enqueue to the last completion) of the first and the third; the median
// over the rounds of the ratios of the others' jobs/s to the first's
// (control/off, on/off); the CPU time per job with the outbox off and on,
// of this process (runner and relay) and of the database; and the
// p99 of how long after its change an event reached the broker, and how
// many events the relay published at once on average. SHEAF_BENCH_BATCH
// sets the relay's batch.
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
	b.ReportMetric(medianRatio(control, off), "control/off")
	b.ReportMetric(medianRatio(on, off), "on/off")
	for _, q := range []struct {
		name string
		q    *benchQueue
	}{{"off", off}, {"on", on}} {
		process, server := q.q.cpuUS()
		b.ReportMetric(process, q.name+"_cpu_us/job")
		b.ReportMetric(server, q.name+"_db_cpu_us/job")
	}
	p99, events := lag.quantile(0.99)
	b.ReportMetric(ms(p99), "p99_delivery_ms")
	lag.mu.Lock()
	b.ReportMetric(float64(events)/float64(max(1, lag.calls)), "events/publish")
	lag.mu.Unlock()
}

// BenchmarkBridgeDelivery enqueues jobs at a steady SHEAF_BENCH_RATE jobs/s
// (default 5000), a batch every 10 ms, for SHEAF_BENCH_SECONDS seconds
// (default 2) a round, on a queue whose relay publishes to a broker that
// only acknowledges, and reports how long after its change each event
// reached the broker (p50, p99: two events a job, its creation and its
// completion) and the rate at which jobs were enqueued and worked.
func BenchmarkBridgeDelivery(b *testing.B) {
	rate, secs := envInt("SHEAF_BENCH_RATE", 5000), envInt("SHEAF_BENCH_SECONDS", 2)
	const tick = 10 * time.Millisecond
	per := max(1, rate*int(tick/time.Millisecond)/1000)
	lag := &lagBroker{}
	q := newBenchQueue(b, func(c *queue.Client) *bridge.Relay {
		r, err := bridge.NewRelay(c, lag, bridge.WithLogger(quiet()))
		if err != nil {
			b.Fatal(err)
		}
		return r
	})
	jobs := make([]queue.Params, per)
	for i := range jobs {
		jobs[i] = queue.Params{Args: report{}}
	}
	var worked int
	var spent time.Duration
	for range b.N {
		target, start := q.done.Load(), time.Now()
		ticker := time.NewTicker(tick)
		for time.Since(start) < time.Duration(secs)*time.Second {
			<-ticker.C
			if _, err := q.client.EnqueueMany(context.Background(), jobs); err != nil {
				b.Fatal(err)
			}
			target += int64(per)
			worked += per
		}
		ticker.Stop()
		for q.done.Load() < target {
			time.Sleep(time.Millisecond) // a benchmark's poll of a counter
		}
		spent += time.Since(start)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if lag.count() >= 2*worked {
			break
		}
	}
	p50, _ := lag.quantile(0.5)
	p99, n := lag.quantile(0.99)
	if n < 2*worked {
		b.Fatalf("%d events of %d reached the broker", n, 2*worked)
	}
	b.ReportMetric(float64(worked)/spent.Seconds(), "jobs/s")
	b.ReportMetric(ms(p50), "p50_delivery_ms")
	b.ReportMetric(ms(p99), "p99_delivery_ms")
}

// envInt is the number environment variable name holds, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// BenchmarkRelayDrain enqueues SHEAF_BENCH_JOBS jobs (default 5000) on a
// queue whose outbox is on and no runner works, then lets a relay publish
// their created events to a broker that only acknowledges, b.N times, and
// reports the CPU time per event of the relay's rounds alone: of this
// process and of the database.
func BenchmarkRelayDrain(b *testing.B) {
	n := envInt("SHEAF_BENCH_JOBS", 5000)
	db := pgtest.NewDB(b)
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	client, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()))
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if err := bridge.Enable(ctx, client); err != nil {
		b.Fatal(err)
	}
	lag := &lagBroker{}
	relay, err := bridge.NewRelay(client, lag, bridge.WithLogger(quiet()), bridge.WithBatch(envInt("SHEAF_BENCH_BATCH", bridge.DefaultBatch)))
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: report{}}
	}
	var cpu pgtest.CPU
	var spent time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := client.EnqueueMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		target := lag.count() + n
		meter := pgtest.StartCPU(db)
		start := time.Now()
		for lag.count() < target {
			if _, err := relay.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		spent += time.Since(start)
		c := meter.Stop()
		cpu.Process, cpu.Server = cpu.Process+c.Process, cpu.Server+c.Server
	}
	events := float64(b.N * n)
	b.ReportMetric(events/spent.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Process.Microseconds())/events, "cpu_us/event")
	b.ReportMetric(float64(cpu.Server.Microseconds())/events, "db_cpu_us/event")
}
