// Command queuebench measures sheaf's job queue on a PostgreSQL server, or
// with -store sqlite on an SQLite file, or with -store mysql on MariaDB, in the spirit of River's "river
// bench": how fast jobs go in, and how fast a runner works them.
//
// By default it inserts -jobs no-op jobs in one EnqueueBulk call (a COPY),
// then starts one runner with -workers workers and times it until every job
// is COMPLETED. With -duration it instead inserts and works at the same
// time for that long: a producer enqueues bulks of jobs back to back while
// the runner works, and the report gives both rates and the backlog left.
//
//	go run ./examples/queuebench [-store postgres|sqlite|mysql] [-jobs 200000] [-workers 100] [-duration 0] [-dsn URL]
//
// On PostgreSQL it works in a schema of its own, sheaf_bench, which it drops
// and recreates at start; on SQLite, in a file of a temporary folder that it
// removes at the end; on MariaDB, in the database of -dsn (a mysql:// URL,
// by default mysql://root@127.0.0.1:3306/test), whose queue tables it drops
// and recreates at start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/mysqldb"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

const (
	defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	schema     = "sheaf_bench"
	// producerBulk is how many jobs the producer of the duration mode
	// enqueues per EnqueueBulk call: large enough that a COPY's fixed cost
	// is small per job, small enough that the runner sees a steady stream.
	producerBulk = 2000
)

// Noop is the benchmark's job: it does nothing, so what is measured is the
// queue's own cost per job.
type Noop struct{}

// Kind names the job type in the queue.
func (Noop) Kind() string { return "bench_noop" }

type options struct {
	store    string
	dsn      string
	jobs     int
	workers  int
	duration time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.store, "store", "postgres", "postgres, sqlite for a file in a temporary folder opened with sqlitedb.Open, or mysql")
	flag.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL (default $DATABASE_URL, else "+defaultDSN+")")
	flag.IntVar(&o.jobs, "jobs", 200_000, "jobs to insert and work (fixed-count mode)")
	flag.IntVar(&o.workers, "workers", queue.DefaultWorkers, "jobs the runner works at once")
	flag.DurationVar(&o.duration, "duration", 0, "insert and work at the same time for this long; 0 inserts -jobs first, then works them")
	flag.Parse()
	if o.dsn == "" {
		o.dsn = os.Getenv("DATABASE_URL")
	}
	if o.dsn == "" {
		o.dsn = defaultDSN
		if o.store == "mysql" {
			o.dsn = defaultMySQL
		}
	}
	if o.jobs < 1 || o.duration < 0 {
		log.Fatal("queuebench: -jobs must be positive and -duration not negative")
	}
	if o.store != "postgres" && o.store != "sqlite" && o.store != "mysql" {
		log.Fatalf("queuebench: -store is postgres, sqlite or mysql, not %q", o.store)
	}
	// Ctrl-C ends the window of -duration early, or abandons a fixed-count
	// run; either way the runner is stopped cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal("queuebench: ", err)
	}
}

// bench is one run: the database, the queue's client and what the
// observer has counted.
type bench struct {
	db      *gorm.DB
	table   string // where the jobs are, for the report
	client  *queue.Client
	workers int
	worked  atomic.Int64 // completions observed
}

func run(ctx context.Context, o options) error {
	d, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer d.close()
	db := d.db
	reg := queue.NewRegistry()
	err = queue.Register(reg, queue.HandlerFunc[Noop](func(context.Context, *queue.Job[Noop]) error { return nil }))
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := queue.NewClient(db, reg, queue.WithLogger(quiet))
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	fmt.Printf("queuebench: %s, %s, %d CPUs, %d workers\n", d.about, runtime.Version(), runtime.NumCPU(), o.workers)

	b := &bench{db: db, table: d.table, client: client, workers: o.workers}
	if o.duration > 0 {
		return b.concurrent(ctx, o.duration)
	}
	return b.fixed(ctx, o.jobs)
}

// fixed inserts n jobs in one bulk, then works them and checks that every
// one is COMPLETED.
func (b *bench) fixed(ctx context.Context, n int) error {
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: Noop{}}
	}
	start := time.Now()
	inserted, err := b.client.EnqueueBulk(ctx, jobs)
	if err != nil {
		return err
	}
	insertTook := time.Since(start)
	fmt.Printf("inserted %s jobs with EnqueueBulk in %v\n", thousands(inserted), insertTook.Round(time.Millisecond))

	all := make(chan struct{})
	var allOnce sync.Once
	runner, err := b.runner(func() {
		if b.worked.Load() == inserted {
			allOnce.Do(func() { close(all) })
		}
	})
	if err != nil {
		return err
	}
	fmt.Printf("working them with %d workers\n", b.workers)
	start = time.Now()
	if err := runner.Start(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := int64(0)
	var waitErr error
wait:
	for {
		select {
		case <-all:
			break wait
		case <-ctx.Done():
			waitErr = fmt.Errorf("interrupted with %s of %s jobs worked", thousands(b.worked.Load()), thousands(inserted))
			break wait
		case <-tick.C:
			now := b.worked.Load()
			fmt.Printf("  %5.1fs  %9s worked  %9s jobs/s\n", time.Since(start).Seconds(), thousands(now), thousands(now-last))
			last = now
		}
	}
	workTook := time.Since(start)
	if err := errors.Join(waitErr, b.stop(runner)); err != nil {
		return err
	}
	var completed int64
	err = b.db.WithContext(ctx).Raw("SELECT count(*) FROM sheaf_jobs WHERE status = 'COMPLETED'").Scan(&completed).Error
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("insert  %9s jobs in %7.3fs  %9s jobs/s  (one EnqueueBulk call)\n",
		thousands(inserted), insertTook.Seconds(), rate(inserted, insertTook))
	fmt.Printf("work    %9s jobs in %7.3fs  %9s jobs/s  (one runner, %d workers)\n",
		thousands(inserted), workTook.Seconds(), rate(inserted, workTook), b.workers)
	fmt.Printf("check   %9s jobs COMPLETED in %s\n", thousands(completed), b.table)
	if completed != inserted {
		return fmt.Errorf("%d jobs inserted but %d COMPLETED", inserted, completed)
	}
	return nil
}

// concurrent inserts and works at the same time for d.
func (b *bench) concurrent(ctx context.Context, d time.Duration) error {
	runner, err := b.runner(nil)
	if err != nil {
		return err
	}
	var inserted atomic.Int64
	jobs := make([]queue.Params, producerBulk)
	for i := range jobs {
		jobs[i] = queue.Params{Args: Noop{}}
	}
	fmt.Printf("inserting (bulks of %s) and working for %v\n", thousands(producerBulk), d)
	start := time.Now()
	if err := runner.Start(ctx); err != nil {
		return err
	}
	// The producer checks stop between bulks rather than having its
	// context cancelled, so that no COPY is cut off at the end of the
	// window; Ctrl-C (ctx) does cut it off, and that bulk is not counted.
	stop := make(chan struct{})
	var producer sync.WaitGroup
	var produceErr error
	producer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			n, err := b.client.EnqueueBulk(ctx, jobs)
			if err != nil {
				if ctx.Err() == nil {
					produceErr = err
				}
				return
			}
			inserted.Add(n)
		}
	})

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	window := time.NewTimer(d)
	defer window.Stop()
	var lastIn, lastWorked int64
wait:
	for {
		select {
		case <-window.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-tick.C:
			in, w := inserted.Load(), b.worked.Load()
			fmt.Printf("  %5.1fs  inserted %9s (%8s/s)  worked %9s (%8s/s)  backlog %9s\n", time.Since(start).Seconds(),
				thousands(in), thousands(in-lastIn), thousands(w), thousands(w-lastWorked), thousands(in-w))
			lastIn, lastWorked = in, w
		}
	}
	// The rates are over the window; jobs finishing after it do not count.
	took := time.Since(start)
	worked := b.worked.Load()
	close(stop)
	producer.Wait()
	if err := errors.Join(produceErr, b.stop(runner)); err != nil {
		return err
	}
	in := inserted.Load()
	var queued int64
	err = b.db.WithContext(context.WithoutCancel(ctx)).Raw("SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED'").Scan(&queued).Error
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("insert  %9s jobs in %7.3fs  %9s jobs/s  (EnqueueBulk, %s per call)\n",
		thousands(in), took.Seconds(), rate(in, took), thousands(producerBulk))
	fmt.Printf("work    %9s jobs in %7.3fs  %9s jobs/s  (one runner, %d workers)\n",
		thousands(worked), took.Seconds(), rate(worked, took), b.workers)
	fmt.Printf("backlog %9s jobs QUEUED in %s after the runner stopped\n", thousands(queued), b.table)
	return nil
}

// runner builds a runner whose observer counts completions and then calls
// completed, if given.
func (b *bench) runner(completed func()) (*queue.Runner, error) {
	return queue.NewRunner(b.client, queue.WithWorkers(b.workers),
		queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) {
			if ev.Type != queue.EventCompleted {
				return
			}
			b.worked.Add(1)
			if completed != nil {
				completed()
			}
		})))
}

// stop stops a runner, letting its running jobs finish.
func (b *bench) stop(r *queue.Runner) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Stop(ctx)
}

// database is the benchmark's database, empty at start.
type database struct {
	db    *gorm.DB
	table string // where the jobs are, for the report
	about string // the database and its version
	close func()
}

// open opens the database o names: a fresh schema on PostgreSQL, or a file
// in a temporary folder on SQLite, opened as sqlitedb.Open opens it (its
// pool as the queue documentation has it).
func open(ctx context.Context, o options) (*database, error) {
	if o.store == "sqlite" {
		dir, err := os.MkdirTemp("", "queuebench")
		if err != nil {
			return nil, err
		}
		d := &database{table: filepath.Join(dir, "jobs.db")}
		if d.db, err = sqlitedb.Open(d.table); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		d.close = closeDB(d.db, func() { _ = os.RemoveAll(dir) })
		var version string
		if err := d.db.WithContext(ctx).Raw("SELECT sqlite_version()").Scan(&version).Error; err != nil {
			d.close()
			return nil, err
		}
		d.about = "SQLite " + version
		return d, nil
	}
	if o.store == "mysql" {
		return openMySQL(ctx, o)
	}
	// The pool: the runner's four connections (listener, claims,
	// completions, maintenance), one for inserting and one for the checks;
	// the no-op handlers use none.
	db, err := exampledb.FreshSchema(ctx, schema, o.dsn)
	if err != nil {
		return nil, err
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(4 + 2)
		sqlDB.SetMaxIdleConns(4 + 2) // keep them all open between uses; database/sql keeps 2 by default
	}
	d := &database{db: db, table: schema + ".sheaf_jobs", close: closeDB(db, nil)}
	var version string
	if err := db.WithContext(ctx).Raw("SHOW server_version").Scan(&version).Error; err != nil {
		d.close()
		return nil, err
	}
	d.about = "PostgreSQL " + version + ", schema " + schema
	return d, nil
}

// defaultMySQL is -dsn's default with -store mysql.
const defaultMySQL = "mysql://root@127.0.0.1:3306/test"

// openMySQL opens the MariaDB database of o.dsn with mysqldb.Open and drops
// the queue's tables there, so that Migrate starts afresh.
func openMySQL(ctx context.Context, o options) (*database, error) {
	db, err := mysqldb.Open(o.dsn)
	if err != nil {
		return nil, err
	}
	d := &database{db: db, table: "sheaf_jobs", close: closeDB(db, nil)}
	var tables []string
	if err := db.WithContext(ctx).Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'sheaf\\_%'").
		Scan(&tables).Error; err != nil {
		d.close()
		return nil, err
	}
	for _, t := range tables {
		if err := db.WithContext(ctx).Exec("DROP TABLE " + t).Error; err != nil {
			d.close()
			return nil, err
		}
	}
	var version string
	if err := db.WithContext(ctx).Raw("SELECT version()").Scan(&version).Error; err != nil {
		d.close()
		return nil, err
	}
	d.about = "MariaDB " + version
	return d, nil
}

// closeDB returns a function that closes db's pool, then calls after, if
// given.
func closeDB(db *gorm.DB, after func()) func() {
	return func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		if after != nil {
			after()
		}
	}
}

func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return thousands(int64(float64(n) / d.Seconds()))
}

// thousands prints n with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
