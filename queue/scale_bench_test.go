package queue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// scaleJobs is how many finished jobs BenchmarkQueueAtScale fills the table
// with: SHEAF_SCALE_JOBS, 100,000 by default so that a run of every
// benchmark stays short; the documented figures use 10,000,000.
var scaleJobs = envInt("SHEAF_SCALE_JOBS", 100_000)

// scaleNights is how many nights the finished jobs are spread over.
const scaleNights = 90

// BenchmarkQueueAtScale measures a queue whose table holds scaleJobs
// finished jobs from scaleNights nightly runs against the same queue empty,
// on a PostgreSQL server of its own: a runner's throughput on fresh jobs,
// pickup latency, every dashboard page's and the stats read's server time.
// It reports each figure at scale and as a ratio to the empty table's, and
// the table's and its indexes' size.
func BenchmarkQueueAtScale(b *testing.B) {
	cl := pgtest.NewCluster(b)
	completed, finished := completionFeed()
	reg := queue.NewRegistry()
	started := make(chan time.Time, 1)
	if err := queue.Register(reg, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	if err := queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error {
		started <- time.Now()
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	sizePoolAsDocumented(cl.SQL)
	// The table at scale, then pruned: one client keeps every job, one
	// prunes with the default retention.
	keep := queue.Retention{Completed: queue.KeepForever, Cancelled: queue.KeepForever, Failed: queue.KeepForever}
	c, err := queue.NewClient(cl.Gorm, reg, quiet(), completed, queue.WithRetention(keep))
	if err != nil {
		b.Fatal(err)
	}
	pruning, err := queue.NewClient(cl.Gorm, reg, quiet(), completed)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	page, err := console.New(c, console.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	empty := measureScale(b, c, page, finished, started)
	fill := time.Now()
	fillNights(b, cl, scaleJobs, scaleNights)
	b.Logf("filled %d finished jobs over %d nights in %s", scaleJobs, scaleNights, time.Since(fill).Round(time.Second))
	// The leader rolls days up as they end; a table filled at once is
	// rolled up first, as after an upgrade, so that the figures at scale
	// are those of a queue in its steady state.
	rollup := time.Now()
	if _, err := c.Prune(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(rollup).Seconds(), "first_rollup_s")
	full := measureScale(b, c, page, finished, started)
	table, indexes := relationSizes(b, cl)
	pruned, prunedIn, whilePruning := pruneAtScale(b, cl, pruning, finished)
	b.StopTimer()
	b.Logf("pruned %d jobs in %s; a runner meanwhile did %.0f jobs/s", pruned, prunedIn.Round(time.Second), whilePruning)
	b.ReportMetric(prunedIn.Seconds(), "prune_s")
	b.ReportMetric(whilePruning/full.jobsPerSec, "pruning_jobs/s_ratio")
	prunedTable, prunedIndexes := relationSizes(b, cl)
	b.ReportMetric(float64(prunedTable)/(1<<20), "pruned_table_MiB")
	b.ReportMetric(float64(prunedIndexes)/(1<<20), "pruned_index_MiB")

	b.ReportMetric(full.jobsPerSec, "jobs/s")
	b.ReportMetric(full.jobsPerSec/empty.jobsPerSec, "jobs/s_ratio")
	b.ReportMetric(ms(full.pickupP50), "pickup_p50_ms")
	b.ReportMetric(ms(full.pickupP99), "pickup_p99_ms")
	b.ReportMetric(ms(full.pickupP50)/ms(empty.pickupP50), "pickup_p50_ratio")
	b.ReportMetric(ms(full.stats), "stats_ms")
	worst, worstPath := time.Duration(0), ""
	for path, d := range full.pages {
		b.Logf("%-28s empty %7.2f ms  full %8.2f ms", path, ms(empty.pages[path]), ms(d))
		if d > worst {
			worst, worstPath = d, path
		}
	}
	b.Logf("slowest page at scale: %s", worstPath)
	b.ReportMetric(ms(worst), "page_p50_max_ms")
	b.ReportMetric(float64(table)/(1<<20), "table_MiB")
	b.ReportMetric(float64(indexes)/(1<<20), "index_MiB")
}

// scaleFigures is what measureScale measured.
type scaleFigures struct {
	jobsPerSec           float64
	pickupP50, pickupP99 time.Duration
	stats                time.Duration
	pages                map[string]time.Duration // median server time by path
}

// scaleThroughputJobs is how many fresh jobs each throughput round works.
const scaleThroughputJobs = 20_000

// measureScale measures c as BenchmarkQueueAtScale describes.
func measureScale(b *testing.B, c *queue.Client, page http.Handler, finished <-chan struct{}, started chan time.Time) scaleFigures {
	ctx := context.Background()
	var f scaleFigures

	r, t0 := workFresh(b, c, finished)
	f.jobsPerSec = scaleThroughputJobs / time.Since(t0).Seconds()

	lat := make([]time.Duration, 200)
	for i := range lat {
		t := time.Now()
		if _, err := c.Enqueue(ctx, report{County: "x"}); err != nil {
			b.Fatal(err)
		}
		lat[i] = (<-started).Sub(t)
	}
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	f.pickupP50, f.pickupP99 = lat[len(lat)/2], lat[len(lat)*99/100]

	t := time.Now()
	if _, err := c.Stats(ctx); err != nil {
		b.Fatal(err)
	}
	f.stats = time.Since(t)

	failed, err := c.List(ctx, queue.Filter{Statuses: []queue.Status{queue.StatusFailed}, Newest: true, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	paths := []string{"/", "/jobs", "/jobs?status=FAILED", "/runs", "/schedules", "/audit",
		"/api/stats", "/api/queues", "/api/jobs?status=FAILED", "/api/runs"}
	if len(failed) > 0 {
		paths = append(paths, fmt.Sprintf("/jobs/%d", failed[0].ID))
		if failed[0].RunID != nil {
			paths = append(paths, "/runs/"+*failed[0].RunID)
		}
	}
	f.pages = map[string]time.Duration{}
	for _, p := range paths {
		f.pages[p] = serverTime(b, page, p)
	}
	return f
}

// serverTime is the median time page takes to serve path, of seven
// requests.
func serverTime(b *testing.B, page http.Handler, path string) time.Duration {
	times := make([]time.Duration, 7)
	for i := range times {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		t := time.Now()
		page.ServeHTTP(rec, req)
		times[i] = time.Since(t)
		if rec.Code != http.StatusOK {
			body, _ := io.ReadAll(rec.Result().Body)
			b.Fatalf("GET %s: %d %s", path, rec.Code, body)
		}
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// workFresh enqueues scaleThroughputJobs no-op jobs, starts a runner of c
// and returns it, running, once they have completed, with when it started.
func workFresh(b *testing.B, c *queue.Client, finished <-chan struct{}) (*queue.Runner, time.Time) {
	enqueueNoops(b, c, scaleThroughputJobs)
	r, err := queue.NewRunner(c)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	for range scaleThroughputJobs {
		<-finished
	}
	return r, t0
}

// pruneAtScale starts a runner of c, whose maintenance rolls the filled
// nights up and prunes them to the default retention, and works
// scaleThroughputJobs fresh jobs with it meanwhile. It returns how many
// jobs were pruned, how long the pruning took (until the completed jobs
// older than 31 days are gone, polled every 100 ms: younger nights stay
// with their failed jobs, kept 30 days), and the jobs/s the runner did
// meanwhile.
func pruneAtScale(b *testing.B, cl *pgtest.Cluster, c *queue.Client, finished <-chan struct{}) (int64, time.Duration, float64) {
	ctx := context.Background()
	old := func() (n int64) {
		if err := cl.SQL.QueryRow("SELECT count(*) FROM sheaf_jobs WHERE status = 'COMPLETED' AND completed_at < now() - interval '31 days'").Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	before := old()
	r, t0 := workFresh(b, c, finished)
	rate := scaleThroughputJobs / time.Since(t0).Seconds()
	for old() > 0 {
		if time.Since(t0) > 30*time.Minute {
			b.Fatalf("pruning left %d of %d old jobs after 30 minutes", old(), before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(t0)
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	return before, took, rate
}

// completionFeed returns an observer option, and a channel that receives
// once for each no-op job that completes.
func completionFeed() (queue.InstrumentOption, chan struct{}) {
	done := make(chan struct{}, 4*scaleThroughputJobs)
	return queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted && ev.Kind == "noop" {
			done <- struct{}{}
		}
	})), done
}

// fillNights inserts jobs finished jobs of five kinds, spread evenly over
// the given number of nights before today, as nightly runs would leave
// them: 97% completed, 2% failed after three attempts (each recorded),
// 1% cancelled, each night's run's counts kept as the maintenance leader
// keeps them; then it analyses the tables, as autovacuum would soon.
func fillNights(b *testing.B, cl *pgtest.Cluster, jobs, nights int) {
	ctx := context.Background()
	perNight := jobs / nights
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for n := nights; n >= 1; n-- {
		night := today.Add(-time.Duration(n)*24*time.Hour + 23*time.Hour)
		run := "nightly@" + night.Format(time.RFC3339)
		err := cl.Gorm.WithContext(ctx).Exec(`
INSERT INTO sheaf_jobs (kind, queue, status, priority, payload, attempts, claims, max_attempts,
	run_at, created_at, started_at, completed_at, run_id, period, last_error)
SELECT 'scale_' || (g % 5), 'default',
	CASE WHEN g % 100 < 2 THEN 'FAILED' WHEN g % 100 = 2 THEN 'CANCELLED' ELSE 'COMPLETED' END,
	5, jsonb_build_object('n', g),
	CASE WHEN g % 100 < 2 THEN 3 ELSE 1 END, CASE WHEN g % 100 < 2 THEN 3 ELSE 1 END, 3,
	t, t, t, t + (50 + g % 950) * interval '1 millisecond', ?, ?,
	CASE WHEN g % 100 < 2 THEN 'report ' || (g % 7) || ': upstream timed out' END
FROM generate_series(1, ?) g, LATERAL (SELECT ?::timestamptz + g * interval '10 millisecond' AS t) s`,
			run, night.Format("2006-01-02"), perNight, night).Error
		if err != nil {
			b.Fatal(err)
		}
	}
	err := cl.Gorm.WithContext(ctx).Exec(`
INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error)
SELECT id, c, 'scale', started_at, completed_at, CASE WHEN c < 3 THEN 'retried' ELSE 'failed' END, last_error
FROM sheaf_jobs, generate_series(1, 3) c WHERE status = 'FAILED' AND run_id LIKE 'nightly@%'`).Error
	if err == nil {
		// The runs as the maintenance leader leaves them: each finished
		// run's counts kept in its row.
		err = cl.Gorm.WithContext(ctx).Exec(`
INSERT INTO sheaf_runs (run_id, period, first_created, last_created, max_id, counts)
SELECT run_id, min(period), min(first), max(last), max(newest), jsonb_object_agg(status, n)
FROM (SELECT run_id, status, min(period) AS period, min(created_at) AS first, max(created_at) AS last, max(id) AS newest, count(*) AS n
	FROM sheaf_jobs WHERE run_id LIKE 'nightly@%' GROUP BY run_id, status) s
GROUP BY run_id`).Error
	}
	if err == nil {
		err = cl.Gorm.WithContext(ctx).Exec("ANALYZE").Error
	}
	if err != nil {
		b.Fatal(err)
	}
}

// relationSizes returns the jobs table's size and its indexes' on cl.
func relationSizes(b *testing.B, cl *pgtest.Cluster) (table, indexes int64) {
	row := cl.SQL.QueryRow("SELECT pg_table_size('sheaf_jobs'), pg_indexes_size('sheaf_jobs')")
	if err := row.Scan(&table, &indexes); err != nil {
		b.Fatal(err)
	}
	return table, indexes
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
