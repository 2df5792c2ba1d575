package queue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
// benchmark stays short; the documented figures use 1,000,000.
var scaleJobs = envInt("SHEAF_SCALE_JOBS", 100_000)

// scaleNights is how many nights the finished jobs are spread over.
const scaleNights = 90

// scaleRounds is how many rounds of work BenchmarkQueueAtScale gives each
// table, taking turns.
const scaleRounds = 5

// BenchmarkQueueAtScale measures a queue whose table holds scaleJobs
// finished jobs from scaleNights nightly runs against a queue whose table
// is empty, on one PostgreSQL server of its own, each in a schema: a
// runner's throughput on fresh jobs and pickup latency (right after each
// round, and on the idle queue once autovacuum has been), in rounds that
// take turns between the two so that a machine shared with other work
// weighs on both alike; then every dashboard page's and the stats read's
// server time. It reports each figure at scale and as a ratio to the
// empty table's (the median of the rounds' ratios for throughput), the
// table's and its indexes' size, and what pruning to the default
// retention costs a runner working beside it.
func BenchmarkQueueAtScale(b *testing.B) {
	cl := pgtest.NewCluster(b)
	spare := cl.NewDB(b)
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
	sizePoolAsDocumented(spare.SQL)
	// The table at scale, then pruned: one client keeps every job, one
	// prunes with the default retention; a third keeps every job of the
	// empty table.
	keep := queue.WithRetention(queue.Retention{Completed: queue.KeepForever, Cancelled: queue.KeepForever, Failed: queue.KeepForever})
	ctx := context.Background()
	newClient := func(db *pgtest.DB, opts ...queue.ClientOption) (*queue.Client, http.Handler) {
		c, err := queue.NewClient(db.Gorm, reg, append([]queue.ClientOption{quiet(), completed}, opts...)...)
		if err == nil {
			err = c.Migrate(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		page, err := console.New(c, console.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		return c, page
	}
	c, page := newClient(cl.DB, keep)
	empty, emptyPage := newClient(spare, keep)
	pruning, _ := newClient(cl.DB)
	b.ResetTimer()
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
	b.ReportMetric(float64(settleFill(b, cl, c, finished, started)), "settle_jobs")

	var emptyRound, fullRound scaleRound
	var ratios []float64
	for i := range scaleRounds {
		e := workRound(b, spare, empty, finished, started)
		f := workRound(b, cl.DB, c, finished, started)
		b.Logf("round %d: empty %.0f jobs/s, CPU %.1f + server %.1f µs/job; full %.0f jobs/s, CPU %.1f + server %.1f µs/job (%.2f)",
			i+1, e.jobsPerSec, e.cpu, e.serverCPU, f.jobsPerSec, f.cpu, f.serverCPU, f.jobsPerSec/e.jobsPerSec)
		ratios = append(ratios, f.jobsPerSec/e.jobsPerSec)
		emptyRound.add(e)
		fullRound.add(f)
	}
	idle := idlePickups(b, time.Now(), started, []*pgtest.DB{cl.DB, spare}, []*queue.Client{c, empty})
	full := measurePages(b, c, page)
	emptyPages := measurePages(b, empty, emptyPage)
	table, indexes := relationSizes(b, cl)
	fullRate := median(fullRound.rates)
	// A leader with nothing to prune, then one that prunes: the same
	// runner, the same work, the pruning the only difference.
	idleRate := idleLeaderRate(b, c, finished)
	pruned, prunedIn, whilePruning := pruneAtScale(b, cl, pruning, finished)
	b.StopTimer()
	b.Logf("pruned %d jobs in %s; a runner meanwhile did %.0f jobs/s, %.0f with nothing to prune", pruned,
		prunedIn.Round(time.Second), whilePruning, idleRate)
	b.ReportMetric(prunedIn.Seconds(), "prune_s")
	b.ReportMetric(whilePruning/idleRate, "pruning_jobs/s_ratio")
	prunedTable, prunedIndexes := relationSizes(b, cl)
	b.ReportMetric(float64(prunedTable)/(1<<20), "pruned_table_MiB")
	b.ReportMetric(float64(prunedIndexes)/(1<<20), "pruned_index_MiB")

	b.ReportMetric(fullRate, "jobs/s")
	b.ReportMetric(median(emptyRound.rates), "empty_jobs/s")
	b.ReportMetric(median(ratios), "jobs/s_ratio")
	b.ReportMetric(median(fullRound.cpus)/median(emptyRound.cpus), "cpu/job_ratio")
	b.ReportMetric(median(fullRound.servers)/median(emptyRound.servers), "server_cpu/job_ratio")
	b.ReportMetric(median(fullRound.servers), "server-cpu-us/job")
	fullP50, fullP99 := fullRound.pickup()
	emptyP50, emptyP99 := emptyRound.pickup()
	b.Logf("pickup after a round p50/p99: empty %.2f/%.2f ms, full %.2f/%.2f ms", ms(emptyP50), ms(emptyP99), ms(fullP50), ms(fullP99))
	b.ReportMetric(ms(fullP50), "busy_pickup_p50_ms")
	b.ReportMetric(ms(fullP50)/ms(emptyP50), "busy_pickup_p50_ratio")
	fullP50, fullP99 = idle[0].pickup()
	emptyP50, emptyP99 = idle[1].pickup()
	b.Logf("pickup idle p50/p99: empty %.2f/%.2f ms, full %.2f/%.2f ms", ms(emptyP50), ms(emptyP99), ms(fullP50), ms(fullP99))
	b.ReportMetric(ms(fullP50), "pickup_p50_ms")
	b.ReportMetric(ms(fullP99), "pickup_p99_ms")
	b.ReportMetric(ms(fullP50)/ms(emptyP50), "pickup_p50_ratio")
	b.ReportMetric(ms(fullP99)/ms(emptyP99), "pickup_p99_ratio")
	b.Logf("stats uncached: empty %.2f ms, full %.2f ms", ms(emptyPages.stats), ms(full.stats))
	b.ReportMetric(ms(full.stats), "stats_ms")
	worst, worstPath := time.Duration(0), ""
	for _, path := range slices.Sorted(maps.Keys(full.pages)) {
		d := full.pages[path]
		b.Logf("%-36s empty %7.2f ms  full %8.2f ms", path, ms(emptyPages.pages[path]), ms(d))
		if d > worst {
			worst, worstPath = d, path
		}
	}
	b.Logf("slowest page at scale: %s", worstPath)
	b.ReportMetric(ms(worst), "page_p50_max_ms")
	b.Logf("a night's review, first request: empty %.2f ms, full %.2f ms", ms(emptyPages.firstReview), ms(full.firstReview))
	b.ReportMetric(ms(full.firstReview), "review_first_ms")
	b.ReportMetric(float64(table)/(1<<20), "table_MiB")
	b.ReportMetric(float64(indexes)/(1<<20), "index_MiB")
}

// scaleRound is what rounds of work on one table measured.
type scaleRound struct {
	jobsPerSec     float64
	cpu, serverCPU float64 // µs a job, of this process and of the server
	rates          []float64
	cpus, servers  []float64
	lat            []time.Duration // pickup latencies
}

// add adds r's figures to s's.
func (s *scaleRound) add(r scaleRound) {
	s.rates = append(s.rates, r.jobsPerSec)
	s.cpus = append(s.cpus, r.cpu)
	s.servers = append(s.servers, r.serverCPU)
	s.lat = append(s.lat, r.lat...)
}

// pickup is the median and the 99th percentile of s's pickup latencies.
func (s *scaleRound) pickup() (p50, p99 time.Duration) {
	slices.Sort(s.lat)
	return s.lat[len(s.lat)/2], s.lat[len(s.lat)*99/100]
}

// median is the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// scaleFigures is what measurePages measured.
type scaleFigures struct {
	stats time.Duration
	pages map[string]time.Duration // median server time by path
	// firstReview is the first request of a finished night's review,
	// which finds its slow jobs and keeps them for the others.
	firstReview time.Duration
}

// settleFill works rounds of fresh jobs on the full table until a round's
// jobs share pages as they would at the table's end, at least four to a
// page, and returns how many it worked (at most 20 rounds). The fill
// leaves room for one more small row in many of its pages, and the table's
// free space map hands that room out first: until it is used up, each
// fresh job lands in a page of its own, and each page's first change
// after a checkpoint writes the page whole to the write-ahead log. At
// 1,000,000 jobs the first round uses that room up; at 10,000,000 several
// do, each at half the rate of the rounds after them. A table that grew
// night by night fills such room as its jobs leave it; the rounds measure
// a table in that state.
func settleFill(b *testing.B, cl *pgtest.Cluster, c *queue.Client, finished <-chan struct{}, started chan time.Time) int {
	worked := 0
	for i := range 20 {
		var first int64
		if err := cl.SQL.QueryRow("SELECT coalesce(max(id), 0) FROM sheaf_jobs").Scan(&first); err != nil {
			b.Fatal(err)
		}
		r := workRound(b, cl.DB, c, finished, started)
		worked += scaleThroughputJobs
		var pages int
		if err := cl.SQL.QueryRow("SELECT count(DISTINCT (ctid::text::point)[0]) FROM sheaf_jobs WHERE kind = 'noop' AND id > $1",
			first).Scan(&pages); err != nil {
			b.Fatal(err)
		}
		b.Logf("settling round %d: %.0f jobs/s, %d jobs in %d pages", i+1, r.jobsPerSec, scaleThroughputJobs, pages)
		if pages <= scaleThroughputJobs/4 {
			break
		}
	}
	return worked
}

// scaleThroughputJobs is how many fresh jobs each throughput round works.
const scaleThroughputJobs = 20_000

// workRound works scaleThroughputJobs fresh jobs with a runner of c, on
// db, measuring the CPU time it and the server spend on them, then
// measures the pickup latency of 200 jobs enqueued one at a time with it.
// The runner does no maintenance: a runner that becomes the leader rolls
// up the day so far as it starts, so with a new runner each round every
// round would pay for the jobs of the rounds before it (measured: 11 µs
// of this process's CPU a job in the first of six rounds, 20 in the
// sixth, where one runner kept across the rounds stayed at 11).
// Maintenance is measured on its own: the first roll-up, and the pruning.
func workRound(b *testing.B, db *pgtest.DB, c *queue.Client, finished <-chan struct{}, started chan time.Time) scaleRound {
	ctx := context.Background()
	enqueueNoops(b, c, scaleThroughputJobs)
	cpu := pgtest.StartCPU(db)
	r, t0 := startRunner(b, c, queue.WithoutMaintenance())
	for range scaleThroughputJobs {
		<-finished
	}
	out := scaleRound{jobsPerSec: scaleThroughputJobs / time.Since(t0).Seconds(), lat: make([]time.Duration, 200)}
	used := cpu.Stop()
	out.cpu, out.serverCPU = perJob(used.Process), perJob(used.Server)
	pickups(b, c, started, out.lat)
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	return out
}

// pickups enqueues len(lat) jobs one at a time with c, whose runner is
// up, and records each one's time from Enqueue's call to its handler's
// start.
func pickups(b *testing.B, c *queue.Client, started <-chan time.Time, lat []time.Duration) {
	for i := range lat {
		t := time.Now()
		if _, err := c.Enqueue(context.Background(), report{County: "x"}); err != nil {
			b.Fatal(err)
		}
		lat[i] = (<-started).Sub(t)
	}
}

// idlePickups measures the pickup latency of a runner of each client in
// turn, five rounds of 200 jobs, once autovacuum has been through each
// client's jobs table since after: the latency of a queue that has been
// idle a while. Right after a burst of work, each claim walks the dead
// entries the burst left at the head of the claim index until a vacuum
// removes them (see workRound's figures).
func idlePickups(b *testing.B, after time.Time, started <-chan time.Time, dbs []*pgtest.DB, clients []*queue.Client) []scaleRound {
	ctx := context.Background()
	for _, db := range dbs {
		awaitAutovacuum(b, db, after)
	}
	out := make([]scaleRound, len(clients))
	for range 5 {
		for i, c := range clients {
			r, _ := startRunner(b, c, queue.WithoutMaintenance())
			lat := make([]time.Duration, 200)
			pickups(b, c, started, lat)
			if err := r.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			out[i].lat = append(out[i].lat, lat...)
		}
	}
	return out
}

// awaitAutovacuum waits until autovacuum has finished a pass over db's
// jobs table that ended after after, for at most three minutes (it visits
// each database once a minute by default).
func awaitAutovacuum(b *testing.B, db *pgtest.DB, after time.Time) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var done bool
		err := db.SQL.QueryRow("SELECT coalesce(last_autovacuum > $1, false) FROM pg_stat_user_tables WHERE relname = 'sheaf_jobs' AND schemaname = current_schema()",
			after).Scan(&done)
		if err != nil {
			b.Fatal(err)
		}
		if done {
			b.Logf("autovacuum was through the jobs table %s after the rounds", time.Since(after).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			b.Logf("no autovacuum of the jobs table within three minutes; pickups measured without")
			return
		}
		time.Sleep(250 * time.Millisecond) // polling the statistics view: nothing signals the end of a pass
	}
}

// measurePages measures c's stats read, uncached (the median of five),
// and the server time of every dashboard page.
func measurePages(b *testing.B, c *queue.Client, page http.Handler) scaleFigures {
	ctx := context.Background()
	var f scaleFigures
	stats := make([]time.Duration, 5)
	for i := range stats {
		t := time.Now()
		if _, err := c.Stats(ctx); err != nil {
			b.Fatal(err)
		}
		stats[i] = time.Since(t)
	}
	slices.Sort(stats)
	f.stats = stats[len(stats)/2]

	failed, err := c.List(ctx, queue.Filter{Statuses: []queue.Status{queue.StatusFailed}, Newest: true, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	paths := []string{"/", "/jobs", "/jobs?status=FAILED", "/runs", "/schedules", "/audit",
		"/api/stats", "/api/queues", "/api/jobs?status=FAILED", "/api/runs"}
	if len(failed) > 0 {
		paths = append(paths, "/jobs/{id}")
		if failed[0].RunID != nil {
			paths = append(paths, "/runs/{id}")
		}
	}
	urls := map[string]string{}
	for _, p := range paths {
		switch p {
		case "/jobs/{id}":
			urls[p] = fmt.Sprintf("/jobs/%d", failed[0].ID)
		case "/runs/{id}":
			urls[p] = "/runs/" + *failed[0].RunID
		default:
			urls[p] = p
		}
	}
	// Seven requests of each page, taking turns, so that what else the
	// server does for a while (autovacuum, say) weighs on every page.
	times := map[string][]time.Duration{}
	for range 7 {
		for _, p := range paths {
			times[p] = append(times[p], serverTime(b, page, urls[p]))
		}
	}
	if ts := times["/runs/{id}"]; len(ts) > 0 {
		f.firstReview = ts[0]
	}
	f.pages = map[string]time.Duration{}
	for p, ts := range times {
		slices.Sort(ts)
		f.pages[p] = ts[len(ts)/2]
	}
	return f
}

// serverTime is the time page takes to serve path.
func serverTime(b *testing.B, page http.Handler, path string) time.Duration {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	rec := httptest.NewRecorder()
	t := time.Now()
	page.ServeHTTP(rec, req)
	took := time.Since(t)
	if rec.Code != http.StatusOK {
		body, _ := io.ReadAll(rec.Result().Body)
		b.Fatalf("GET %s: %d %s", path, rec.Code, body)
	}
	return took
}

// besideJobs is how many fresh jobs a runner works beside the pruning:
// seconds of work, so that its rate is the pruning's cost rather than
// that of a new leader's first rounds.
const besideJobs = 5 * scaleThroughputJobs

// workBeside enqueues besideJobs no-op jobs, starts a runner of c, with
// its maintenance, and returns it, running, once they have completed,
// with when it started and its jobs/s.
func workBeside(b testing.TB, c *queue.Client, finished <-chan struct{}) (*queue.Runner, time.Time, float64) {
	enqueueNoops(b, c, besideJobs)
	r, t0 := startRunner(b, c)
	for range besideJobs {
		<-finished
	}
	return r, t0, besideJobs / time.Since(t0).Seconds()
}

// idleLeaderRate is the jobs/s of workBeside with c, whose leader has
// nothing to prune.
func idleLeaderRate(b testing.TB, c *queue.Client, finished <-chan struct{}) float64 {
	r, _, rate := workBeside(b, c, finished)
	if err := r.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rate
}

// startRunner starts a runner of c with opts, and returns it with when it
// started.
func startRunner(b testing.TB, c *queue.Client, opts ...queue.RunnerOption) (*queue.Runner, time.Time) {
	r, err := queue.NewRunner(c, opts...)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return r, t0
}

// perJob is d per job of a round, in microseconds.
func perJob(d time.Duration) float64 { return float64(d.Microseconds()) / scaleThroughputJobs }

// pruneAtScale starts a runner of c, whose maintenance rolls the filled
// nights up and prunes them to the default retention, and works
// besideJobs fresh jobs with it meanwhile. It returns how many
// jobs were pruned, how long the pruning took (until the completed jobs
// older than 31 days are gone, polled every 100 ms: younger nights stay
// with their failed jobs, kept 30 days), and the jobs/s the runner did
// meanwhile. The poll asks whether one such job is left, through the
// index of finished jobs by kind: counting them would read the whole
// table ten times a second, and weigh on what is measured.
func pruneAtScale(b *testing.B, cl *pgtest.Cluster, c *queue.Client, finished <-chan struct{}) (int64, time.Duration, float64) {
	ctx := context.Background()
	const old = ` FROM sheaf_jobs WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND status = 'COMPLETED'
	AND kind IN ('scale_0', 'scale_1', 'scale_2', 'scale_3', 'scale_4') AND completed_at < now() - interval '31 days'`
	var before int64
	if err := cl.SQL.QueryRow("SELECT count(*)" + old).Scan(&before); err != nil {
		b.Fatal(err)
	}
	left := func() (any bool) {
		if err := cl.SQL.QueryRow("SELECT EXISTS (SELECT 1" + old + ")").Scan(&any); err != nil {
			b.Fatal(err)
		}
		return any
	}
	r, t0, rate := workBeside(b, c, finished)
	if !left() {
		b.Logf("the pruning ended before the runner beside it had worked its %d jobs", besideJobs)
	}
	for left() {
		if time.Since(t0) > 90*time.Minute {
			b.Fatalf("pruning left some of %d old jobs after 90 minutes", before)
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
// keeps them; then it vacuums and analyses the tables, as autovacuum soon
// would: a table that has run for months has its rows' hint bits set and
// its pages marked all-visible, and a vacuum of the whole fill running
// beside the measurements would measure the vacuum.
func fillNights(b testing.TB, cl *pgtest.Cluster, jobs, nights int) {
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
		// The runs as their jobs' inserts record them; the first roll-up
		// keeps each finished run's counts, as the maintenance leader does.
		err = cl.Gorm.WithContext(ctx).Exec(`
INSERT INTO sheaf_runs (run_id, period, first_created)
SELECT run_id, min(period), min(created_at) FROM sheaf_jobs WHERE run_id LIKE 'nightly@%' GROUP BY run_id`).Error
	}
	if err == nil {
		err = cl.Gorm.WithContext(ctx).Exec("VACUUM ANALYZE").Error
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
