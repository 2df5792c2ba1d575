// Command riverbench is the yardstick for sheaf's queue: it measures River,
// the leading Go job queue on PostgreSQL, on the same machine and server, the
// way examples/queuebench measures sheaf. It inserts -jobs no-op jobs with
// InsertMany (River's COPY path on PostgreSQL) in slices of 5,000, then
// starts one client and times it until an event subscription has seen every
// job complete.
//
//	cd internal/riverbench && go run . [-driver postgres|sqlite] [-jobs 200000] [-tuned=true] [-dsn URL]
//
// With -tuned (the default) the client uses the settings of River's own
// "river bench" command: 2,000 workers, a 2 ms fetch cooldown and a 20 ms
// fetch poll. With -tuned=false it uses River's defaults and 100 workers,
// sheaf's default. It is a module of its own, so that River is never a
// dependency of sheaf. On PostgreSQL it works in the schema riverbench,
// which it creates if needed and empties at start; with -driver sqlite, in
// a file of a temporary folder that it removes at the end, through River's
// riversqlite driver.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver River's documentation of riversqlite uses
)

const (
	defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	schema     = "riverbench"
	insertBulk = 5000
)

// noop is the benchmark's job; it carries a number so rows differ.
type noop struct {
	N int `json:"n"`
}

func (noop) Kind() string { return "bench_noop" }

type noopWorker struct{ river.WorkerDefaults[noop] }

func (*noopWorker) Work(context.Context, *river.Job[noop]) error { return nil }

func main() {
	driver := flag.String("driver", "postgres", "postgres (riverpgxv5 on pgx) or sqlite (riversqlite on modernc.org/sqlite, a file in a temporary folder)")
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else "+defaultDSN+")")
	jobs := flag.Int("jobs", 200_000, "jobs to insert and work")
	tuned := flag.Bool("tuned", true, "use river bench's settings rather than River's defaults")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	if *dsn == "" {
		*dsn = defaultDSN
	}
	ctx := context.Background()
	var err error
	switch *driver {
	case "postgres":
		err = runPostgres(ctx, *dsn, *jobs, *tuned)
	case "sqlite":
		err = runSQLite(ctx, *jobs, *tuned)
	default:
		err = fmt.Errorf("-driver is postgres or sqlite, not %q", *driver)
	}
	if err != nil {
		log.Fatal("riverbench: ", err)
	}
}

func runPostgres(ctx context.Context, dsn string, jobs int, tuned bool) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return err
	}
	driver := riverpgxv5.New(pool)
	if err := migrate(ctx, driver); err != nil {
		return err
	}
	// As river bench does: an empty, compact table for every run.
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM FULL river_job"); err != nil {
		return err
	}
	return bench(ctx, driver, "PostgreSQL", jobs, tuned)
}

// sqlitePragmas are those sheaf's sqlitedb.Open sets, so that both queues
// write with the same durability: WAL, synchronous NORMAL (commits do not
// wait for the disk), a busy timeout, foreign keys.
const sqlitePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"

func runSQLite(ctx context.Context, jobs int, tuned bool) error {
	dir, err := os.MkdirTemp("", "riverbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+"?"+sqlitePragmas)
	if err != nil {
		return err
	}
	defer db.Close()
	// One connection, as River's documentation of the driver advises:
	// its parallel operations would otherwise meet SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	driver := riversqlite.New(db)
	if err := migrate(ctx, driver); err != nil {
		return err
	}
	return bench(ctx, driver, "SQLite", jobs, tuned)
}

// migrate brings River's schema up to date with River's own migrations.
func migrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// bench inserts the jobs into an empty queue, then works them with one
// client and reports both rates.
func bench[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], database string, jobs int, tuned bool) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	cfg := &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}, Workers: workers}
	if tuned {
		cfg.FetchCooldown, cfg.FetchPollInterval = 2*time.Millisecond, 20*time.Millisecond
		cfg.Queues[river.QueueDefault] = river.QueueConfig{MaxWorkers: 2000}
	}
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1, // every completion fits: none is dropped, none is missed
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()

	start := time.Now()
	params := make([]river.InsertManyParams, 0, insertBulk)
	for done := 0; done < jobs; done += len(params) {
		params = params[:0]
		for i := done; i < min(done+insertBulk, jobs); i++ {
			params = append(params, river.InsertManyParams{Args: noop{N: i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return err
		}
	}
	insert := time.Since(start)

	start = time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	for range jobs {
		<-events
	}
	work := time.Since(start)
	if err := client.Stop(ctx); err != nil {
		return err
	}
	mode := "defaults, 100 workers"
	if tuned {
		mode = "river bench's settings, 2000 workers"
	}
	fmt.Printf("river on %s (%s): inserted %d jobs in %v: %.0f jobs/s\n", database, mode, jobs, insert.Round(time.Millisecond), float64(jobs)/insert.Seconds())
	fmt.Printf("river on %s (%s): worked   %d jobs in %v: %.0f jobs/s\n", database, mode, jobs, work.Round(time.Millisecond), float64(jobs)/work.Seconds())
	return nil
}
