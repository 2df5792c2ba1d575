package queue_test

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// poolSize is the pool the queue documentation sizes (Connections); SHEAF_BENCH_POOL
// overrides it, to compare sizes.
var poolSize = envInt("SHEAF_BENCH_POOL", 20)

// envInt is the number environment variable name holds, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// rawJobsPerSec is the rate of the last BenchmarkQueueRawClaimComplete in
// this process, for BenchmarkQueueThroughput's ratio to it.
var rawJobsPerSec float64

// BenchmarkQueueRawClaimComplete is the yardstick of BenchmarkQueueThroughput:
// the least a queue on the same table can do. It inserts b.N no-op jobs as
// BenchmarkQueueThroughput does, then four goroutines loop with no queue
// code at all: claim up to 100 jobs with one UPDATE over a SELECT ... FOR
// UPDATE SKIP LOCKED on the claim index, complete them by their IDs with
// one more, until none is left. It reports jobs/s, and CPU per job as the
// throughput benchmark does. Run in the same process before it (it is
// declared first), it gives BenchmarkQueueThroughput its x_raw ratio.
func BenchmarkQueueRawClaimComplete(b *testing.B) {
	pgtest.PostgresOnly(b, "the raw loop is PostgreSQL's SQL")
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, nopHandler[noop]()); err != nil {
			b.Fatal(err)
		}
	})
	enqueueNoops(b, e.client, b.N)
	ctx := context.Background()
	// The loop's statements are a baseline for the store's, not part of it,
	// so they live here, in the shape a hand-written queue would use.
	const claim = `UPDATE sheaf_jobs SET status = 'PROCESSING', attempts = attempts + 1, claims = claims + 1,
	started_at = now(), locked_until = now() + interval '30 seconds', locked_by = 'raw'
WHERE id IN (SELECT id FROM sheaf_jobs WHERE status = 'QUEUED' AND rescues = 0 AND queue = 'default' AND run_at <= now()
	ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED)
RETURNING id, kind, payload`
	const complete = `UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = now(), locked_until = NULL WHERE id = ANY($1)`
	var done atomic.Int64
	b.ResetTimer()
	cpu := pgtest.StartCPU(e.db)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				ids, err := rawClaim(ctx, e.db.SQL, claim)
				if err != nil {
					b.Error(err)
					return
				}
				if len(ids) == 0 {
					return
				}
				if _, err := e.db.SQL.ExecContext(ctx, complete, ids); err != nil {
					b.Error(err)
					return
				}
				done.Add(int64(len(ids)))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu.Stop().PerJob(b, b.N)
	if n := done.Load(); n != int64(b.N) {
		b.Fatalf("the raw loop completed %d jobs of %d", n, b.N)
	}
	rawJobsPerSec = float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rawJobsPerSec, "jobs/s")
}

// rawClaim runs the raw loop's claim and returns the IDs it claimed, having
// read each job as a runner would.
func rawClaim(ctx context.Context, db *sql.DB, claim string) ([]int64, error) {
	rows, err := db.QueryContext(ctx, claim)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var kind string
		var payload []byte
		if err := rows.Scan(&id, &kind, &payload); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// BenchmarkQueueThroughput inserts b.N no-op jobs with EnqueueBulk (reported
// as insert_jobs/s) and then works them with one runner under default options,
// reporting jobs/s from the runner's start until the last completion is
// committed, CPU per job (cpu-us/job for this process, server-cpu-us/job for
// the database's backends), and, when BenchmarkQueueRawClaimComplete ran
// before it in the same process, x_raw: jobs/s as a multiple of its.
func BenchmarkQueueThroughput(b *testing.B) {
	completed, finished := countCompletions(b.N)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil })); err != nil {
			b.Fatal(err)
		}
	}, completed)
	start := time.Now()
	enqueueNoops(b, e.client, b.N)
	insert := time.Since(start)
	workAll(b, e.db, e.client, finished)
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "jobs/s")
	b.ReportMetric(float64(b.N)/insert.Seconds(), "insert_jobs/s")
	if rawJobsPerSec > 0 {
		b.ReportMetric(rate/rawJobsPerSec, "x_raw")
	}
}

// countCompletions returns an observer option, and a channel it closes once
// it has seen n jobs complete.
func countCompletions(n int) (queue.InstrumentOption, <-chan struct{}) {
	var done atomic.Int64
	finished := make(chan struct{})
	return queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted && done.Add(1) == int64(n) {
			close(finished)
		}
	})), finished
}

// BenchmarkQueueEnqueueBulk times one EnqueueBulk of b.N jobs into an
// empty, migrated queue under default options, the ANALYZE that follows a
// large bulk included, and reports jobs/s and CPU per job: of no-op jobs,
// all alike (alike), of report jobs, each with a payload of its own
// (distinct), and of those with an idempotency key each (keyed), which
// cannot be copied and are inserted in slices.
func BenchmarkQueueEnqueueBulk(b *testing.B) {
	for _, c := range []struct {
		name  string
		args  func(i int) queue.Args
		keyed bool
	}{
		{"alike", func(int) queue.Args { return noop{} }, false},
		{"distinct", func(i int) queue.Args { return report{County: strconv.Itoa(i)} }, false},
		{"keyed", func(i int) queue.Args { return report{County: strconv.Itoa(i)} }, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnvB(b, func(r *queue.Registry) {
				for _, err := range []error{queue.Register(r, nopHandler[noop]()), queue.Register(r, nopHandler[report]())} {
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			jobs := make([]queue.Params, b.N)
			for i := range jobs {
				jobs[i] = queue.Params{Args: c.args(i)}
				if c.keyed {
					jobs[i].Options = []queue.EnqueueOption{queue.IdempotencyKey(strconv.Itoa(i))}
				}
			}
			b.ResetTimer()
			cpu := pgtest.StartCPU(e.db)
			if _, err := e.client.EnqueueBulk(context.Background(), jobs); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu.Stop().PerJob(b, b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkQueueEnqueueMany enqueues b.N no-op jobs with EnqueueMany, a
// thousand a call: the statement a Client.Tx client's enqueues use, which
// returns each job's record.
func BenchmarkQueueEnqueueMany(b *testing.B) {
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, nopHandler[noop]()); err != nil {
			b.Fatal(err)
		}
	})
	jobs := make([]queue.Params, 1000)
	for i := range jobs {
		jobs[i] = queue.Params{Args: noop{}}
	}
	ctx := context.Background()
	b.ResetTimer()
	cpu := pgtest.StartCPU(e.db)
	for left := b.N; left > 0; left -= len(jobs) {
		if _, err := e.client.EnqueueMany(ctx, jobs[:min(left, len(jobs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu.Stop().PerJob(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// enqueueNoops enqueues n no-op jobs with one EnqueueBulk.
func enqueueNoops(b testing.TB, c *queue.Client, n int) {
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: noop{}}
	}
	if _, err := c.EnqueueBulk(context.Background(), jobs); err != nil {
		b.Fatal(err)
	}
}

// workAll times a runner with default options on c from its start until
// finished closes, and stops it; it reports the CPU time per job spent
// meanwhile by this process and by db's server.
func workAll(b *testing.B, db *pgtest.DB, c *queue.Client, finished <-chan struct{}) {
	ctx := context.Background()
	b.ResetTimer()
	cpu := pgtest.StartCPU(db)
	r, err := queue.NewRunner(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-finished
	b.StopTimer()
	cpu.Stop().PerJob(b, b.N)
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueuePickupLatency enqueues one job at a time into an idle runner
// and measures from just before Enqueue until the handler starts, reporting
// the median and 99th percentile (p50_ms, p99_ms). Most of that is the
// Enqueue, whose commit waits for the server to flush its log to disk, so
// it reports that too (enqueue_p50_ms), and the pickup proper, from
// Enqueue's return, the commit, to the handler's start: the notification,
// the claim and the hand-over to a worker (pickup_p50_ms, pickup_p99_ms).
// Each job is enqueued once the last one's completion is committed, so
// that the runner is idle: the last completion's statement and commit
// would otherwise compete with the notification and the claim for the
// server's two cores.
func BenchmarkQueuePickupLatency(b *testing.B) {
	started, completed := make(chan time.Time, 1), make(chan struct{}, 1)
	e := newEnvB(b, func(r *queue.Registry) {
		if err := queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error {
			started <- time.Now()
			return nil
		})); err != nil {
			b.Fatal(err)
		}
	}, queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted {
			completed <- struct{}{}
		}
	})))
	ctx := context.Background()
	r, err := queue.NewRunner(e.client)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	lat, enq, pickup := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := e.client.Enqueue(ctx, noop{}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		t2 := <-started
		lat, enq, pickup = append(lat, t2.Sub(t0)), append(enq, t1.Sub(t0)), append(pickup, t2.Sub(t1))
		<-completed
	}
	b.StopTimer()
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	at := func(l []time.Duration, pct int) float64 {
		slices.Sort(l)
		return float64(l[len(l)*pct/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(lat, 50), "p50_ms")
	b.ReportMetric(at(lat, 99), "p99_ms")
	b.ReportMetric(at(enq, 50), "enqueue_p50_ms")
	b.ReportMetric(at(pickup, 50), "pickup_p50_ms")
	b.ReportMetric(at(pickup, 99), "pickup_p99_ms")
}

// visit is the row BenchmarkQueueDBHandler's handler writes.
type visit struct {
	ID    int64 `gorm:"primaryKey"`
	JobID int64
	At    time.Time
}

// BenchmarkQueueDBHandler works b.N jobs whose handler inserts one row with
// gorm, through the same *gorm.DB as the queue, under the runner's default
// options and the pool sizing the queue documentation gives (sizePoolAsDocumented); it
// reports jobs/s from the runner's start until the last completion. Its
// baseline, raw, makes the same inserts through the same pool from as many
// goroutines as the runner has workers, with no queue: the ratio of the two
// is what the queue costs such a handler. SHEAF_BENCH_SKIPTX=1 opens gorm
// with SkipDefaultTransaction, as gorm advises for single-statement writes.
func BenchmarkQueueDBHandler(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		db := visitsDB(b, newEnvB(b, func(*queue.Registry) {}))
		var next atomic.Int64
		b.ResetTimer()
		var wg sync.WaitGroup
		for range queue.DefaultWorkers {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := db.Create(&visit{JobID: 1, At: time.Now()}).Error; err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("queue", func(b *testing.B) {
		completed, finished := countCompletions(b.N)
		base := newEnvB(b, func(*queue.Registry) {})
		db := visitsDB(b, base)
		reg := queue.NewRegistry()
		if err := queue.Register(reg, queue.HandlerFunc[noop](func(ctx context.Context, j *queue.Job[noop]) error {
			return db.WithContext(ctx).Create(&visit{JobID: j.ID, At: time.Now()}).Error
		})); err != nil {
			b.Fatal(err)
		}
		c, err := queue.NewClient(db, reg, quiet(), completed)
		if err != nil {
			b.Fatal(err)
		}
		enqueueNoops(b, c, b.N)
		workAll(b, base.db, c, finished)
		if n := base.db.Count(b, "SELECT count(*) FROM visits"); n != int64(b.N) {
			b.Fatalf("%d rows written for %d jobs", n, b.N)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// visitsDB opens a gorm DB on e's database as a user would for
// BenchmarkQueueDBHandler's handler, its pool sized as the queue documentation says, and
// creates the visits table.
func visitsDB(b *testing.B, e *env) *gorm.DB {
	db := openSized(b, e.db.DSN, &gorm.Config{SkipDefaultTransaction: os.Getenv("SHEAF_BENCH_SKIPTX") != ""})
	if err := db.AutoMigrate(&visit{}); err != nil {
		b.Fatal(err)
	}
	return db
}

// openSized opens dsn with gorm, its pool sized as the queue documentation
// says, until the benchmark ends.
func openSized(b *testing.B, dsn string, config ...gorm.Option) *gorm.DB {
	db, err := pgtest.OpenDSN(dsn, config...)
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sqlDB.Close() })
	sizePoolAsDocumented(sqlDB)
	return db
}

// sizePoolAsDocumented sizes a pool as the queue documentation (Connections) tells users to.
func sizePoolAsDocumented(db *sql.DB) {
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
}
