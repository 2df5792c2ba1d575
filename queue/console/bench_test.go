package console_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// The console's benchmarks run on one big table, filled once per run of the
// test binary and shared by every benchmark: SHEAF_BENCH_JOBS jobs, by
// default 1,000,000 (about a minute to fill on PostgreSQL), or 20,000 when
// the run asks for one iteration (-benchtime 1x, as CI runs every
// benchmark once). Run them at full size with
//
//	go test -run '^$' -bench Console -benchtime 20x ./queue/console/
//
// and SHEAF_TEST_STORE=sqlite for the SQLite store.

// The kinds and queues of the big table.
type (
	invoice struct{ Customer string }
	email   struct{ To string }
	export  struct{ Table string }
	resize  struct{ Image string }
)

// nop is the handler of the big table's kinds, which no runner works.
func nop[A queue.Args](context.Context, *queue.Job[A]) error { return nil }

func (invoice) Kind() string { return "invoice" }
func (email) Kind() string   { return "email" }
func (export) Kind() string  { return "export" }
func (resize) Kind() string  { return "resize" }

// Of the table's jobs, the newest fifth are QUEUED; of the older ones, one
// in twenty FAILED, one in fifty of those with an error that holds
// benchRare, and the rest COMPLETED.
const (
	benchKind = "invoice"
	benchRare = "handshake timeout"
)

// The oldest benchRunJobs jobs are a night's run, benchRun.
const (
	benchRunJobs = 500
	benchRun     = "nightly@bench"
)

// benchTable is the shared table: its console, the same without the
// counts cache, and how many jobs it has.
type benchTable struct {
	h, uncached http.Handler
	jobs        int
	err         error
	// close closes the database and removes it.
	close func() error
}

var (
	benchOnce sync.Once
	bench     benchTable
)

// benchJobs is the size of the table: SHEAF_BENCH_JOBS, else 20,000 for a
// run of one iteration, else 1,000,000.
func benchJobs() (int, error) {
	if s := os.Getenv("SHEAF_BENCH_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			return 0, fmt.Errorf("SHEAF_BENCH_JOBS=%q: want a whole number from 100", s)
		}
		return n, nil
	}
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return 20_000, nil
	}
	return 1_000_000, nil
}

// sharedTable returns the big table, filling it on first use.
func sharedTable(b *testing.B) *benchTable {
	b.Helper()
	if pgtest.Store() == "postgres" {
		if err := pgtest.Reachable(); err != nil {
			if os.Getenv("CI") != "" {
				b.Fatal(err)
			}
			b.Skip("PostgreSQL not reachable: ", err)
		}
	}
	benchOnce.Do(func() {
		start := time.Now()
		bench.err = fillTable(&bench)
		if bench.err == nil {
			b.Logf("filled %d jobs in %v", bench.jobs, time.Since(start).Round(time.Millisecond))
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return &bench
}

// dropBenchTable removes the big table, if a benchmark made it.
func dropBenchTable() error {
	if bench.close == nil {
		return nil
	}
	return bench.close()
}

// openBenchDB opens a database of its own on the run's store.
func openBenchDB() (db *gorm.DB, closeDB func() error, err error) {
	if pgtest.Store() == "postgres" {
		var ex pgtest.Examples
		db, err := ex.Open()
		return db, ex.Close, err
	}
	dir, err := os.MkdirTemp("", "sheaf-console-bench")
	if err != nil {
		return nil, nil, err
	}
	db, err = sqlitedb.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	return db, func() error {
		sqlDB, err := db.DB()
		if err == nil {
			err = sqlDB.Close()
		}
		return errors.Join(err, os.RemoveAll(dir))
	}, nil
}

// fillTable makes the big table and its console into t.
func fillTable(t *benchTable) error {
	n, err := benchJobs()
	if err != nil {
		return err
	}
	db, closeDB, err := openBenchDB()
	if err != nil {
		return err
	}
	t.close, t.jobs = closeDB, n
	reg := queue.NewRegistry()
	if err := errors.Join(registerReport(reg),
		queue.Register(reg, queue.HandlerFunc[invoice](nop[invoice])), queue.Register(reg, queue.HandlerFunc[email](nop[email])),
		queue.Register(reg, queue.HandlerFunc[export](nop[export])), queue.Register(reg, queue.HandlerFunc[resize](nop[resize])),
	); err != nil {
		return err
	}
	c, err := queue.NewClient(db, reg, queue.WithLogger(quiet()))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := c.Migrate(ctx); err != nil {
		return err
	}
	queues := []string{"default", "mail", "billing", "media"}
	const slice = 50_000
	for start := 0; start < n; start += slice {
		jobs := make([]queue.Params, min(slice, n-start))
		for i := range jobs {
			k := start + i
			var args queue.Args
			switch k % 5 {
			case 0:
				args = report{County: fmt.Sprintf("county-%d", k%3000)}
			case 1:
				args = invoice{Customer: fmt.Sprintf("customer-%d", k%50_000)}
			case 2:
				args = email{To: fmt.Sprintf("user%d@example.com", k%200_000)}
			case 3:
				args = export{Table: fmt.Sprintf("table_%d", k%40)}
			default:
				args = resize{Image: fmt.Sprintf("img/%d.png", k)}
			}
			opts := []queue.EnqueueOption{queue.OnQueue(queues[(k/5)%len(queues)])}
			if k < benchRunJobs {
				opts = append(opts, queue.InRun(benchRun), queue.InPeriod("2025-12-08"))
			}
			jobs[i] = queue.Params{Args: args, Options: opts}
		}
		if _, err := c.EnqueueBulk(ctx, jobs); err != nil {
			return err
		}
	}
	// Age the older four fifths by hand: their runs as the runner would
	// leave them, a failure in twenty, spread over the last week.
	queued := n / 5
	ago := "now() - make_interval(secs => (id * 7919) %% 604800)"
	if db.Dialector.Name() != "postgres" {
		ago = "strftime('%%Y-%%m-%%d %%H:%%M:%%S', 'now', '-' || ((id * 7919) %% 604800) || ' seconds') || '.000000000+00:00'"
	}
	if err := db.Exec(fmt.Sprintf(`UPDATE sheaf_jobs SET
		status = CASE WHEN id %% 20 = 7 THEN 'FAILED' ELSE 'COMPLETED' END,
		attempts = 1, claims = 1, locked_by = 'bench-runner',
		run_at = `+ago+`, started_at = `+ago+`, completed_at = `+ago+`,
		last_error = CASE WHEN id %% 20 <> 7 THEN NULL
			WHEN id %% 1000 = 7 THEN 'dial tcp 10.0.0.' || (id %% 250) || ':443: %s'
			ELSE 'upstream returned 503 for request 0x' || id END
		WHERE id <= (SELECT max(id) FROM sheaf_jobs) - %d`, benchRare, queued)).Error; err != nil {
		return err
	}
	if err := analyze(db); err != nil {
		return err
	}
	if t.h, err = console.New(c, console.WithLogger(quiet())); err != nil {
		return err
	}
	t.uncached, err = console.New(c, console.WithLogger(quiet()), console.WithCountsCache(0))
	return err
}

// analyze vacuums and analyzes the jobs table, as autovacuum would soon
// after the fill.
func analyze(db *gorm.DB) error {
	if db.Dialector.Name() == "postgres" {
		return db.Exec("VACUUM ANALYZE sheaf_jobs").Error
	}
	return db.Exec("ANALYZE").Error
}

// timeRequests serves GET path b.N times, by the console with the
// counts cache or without, reporting ms/op and the median (p50-ms).
func timeRequests(b *testing.B, path string, cache bool) {
	t := sharedTable(b)
	h := t.h
	if !cache {
		h = t.uncached
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		took = append(took, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/op")
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
}

// BenchmarkConsoleListJobs times the first page of a filtered listing, and
// of a search, on the big table.
func BenchmarkConsoleListJobs(b *testing.B) {
	b.Run("filtered", func(b *testing.B) { timeRequests(b, "/api/jobs?status=failed&kind="+benchKind, true) })
	b.Run("search", func(b *testing.B) { timeRequests(b, "/api/jobs?q=handshake", true) })
}

// BenchmarkConsoleStats times the counts, by status and kind and by queue,
// on the big table, as served (read at most once per DefaultCountsTTL)
// and read afresh for every request.
func BenchmarkConsoleStats(b *testing.B) {
	b.Run("stats", func(b *testing.B) { timeRequests(b, "/api/stats", true) })
	b.Run("queues", func(b *testing.B) { timeRequests(b, "/api/queues", true) })
	b.Run("stats-uncached", func(b *testing.B) { timeRequests(b, "/api/stats", false) })
	b.Run("queues-uncached", func(b *testing.B) { timeRequests(b, "/api/queues", false) })
}

// BenchmarkConsolePages times each page of the dashboard on the big table,
// as served (with the counts cache: the first request of a run reads the
// counts and the activity, the others reuse them), and reports its weight:
// the page and the assets it loads, in KB. overview-uncached reads the
// counts and the activity for every request.
func BenchmarkConsolePages(b *testing.B) {
	b.Run("overview-uncached", func(b *testing.B) { timeRequests(b, "/", false) })
	for _, p := range []struct{ name, path string }{
		{"overview", "/"},
		{"jobs", "/jobs"},
		{"jobs-failed", "/jobs?status=FAILED&kind=" + benchKind},
		{"jobs-search", "/jobs?q=handshake"},
		{"job", "/jobs/7"},
		{"runs", "/runs"},
		{"review", "/runs/" + benchRun},
		{"schedules", "/schedules"},
		{"audit", "/audit"},
	} {
		b.Run(p.name, func(b *testing.B) {
			timeRequests(b, p.path, true)
			b.ReportMetric(float64(weigh(b, sharedTable(b).h, p.path))/1024, "page-KB")
		})
	}
}

// assetRefs finds the stylesheet and script a page loads.
var assetRefs = regexp.MustCompile(`assets/[a-z.]+\?v=[0-9a-f]+`)

// weigh returns the bytes of the page at path and of its assets.
func weigh(b *testing.B, h http.Handler, path string) int {
	get := func(p string) []byte {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", p, w.Code)
		}
		return w.Body.Bytes()
	}
	page := get(path)
	n := len(page)
	for _, a := range assetRefs.FindAll(page, -1) {
		n += len(get("/" + string(a)))
	}
	return n
}
