// Command reportjobs runs county report jobs on sheaf's PostgreSQL job queue.
// It submits one job per county with different priorities; a runner with two
// workers writes each county's timesheet entries, chunk by chunk, to a CSV,
// JSON, Excel or PDF file, masked by the requester's role. One job hits a transient error on its first attempt and
// succeeds on its retry, one is cancelled half-way and its partial file is
// removed, and the program ends with the morning-review table: job, type,
// status, attempts, started, completed, duration, records.
//
//	go run ./examples/reportjobs [-dsn URL] [-out DIR] [-workers 2]
//
// Without -dsn or DATABASE_URL, it works in a new SQLite file in a
// temporary folder, which it removes at the end. With a postgres:// URL, it
// works in a schema of its own, sheaf_example_reportjobs, which it drops and
// recreates at start.
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
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
)

const (
	schema    = "sheaf_example_reportjobs"
	chunkSize = 1000
)

// plan is the night's work, in the order it is submitted. The IDs follow
// this order and the priorities do not, so the start times show the
// priorities at work.
// Each job carries its requester's claims (queue.AuthContext), which decide
// what its report shows (mask.go).
var plan = []struct {
	county   string
	format   string
	priority int
	entries  int
	auth     queue.Auth
}{
	{"Travis", "csv", 6, 12_000, admin}, // cancelled half-way
	{"El Paso", "json", 2, 6_000, caseWorker("El Paso")},
	{"Harris", "xlsx", 9, 18_000, supervisor},
	{"Bexar", "pdf", 5, 10_000, supervisor},
	{"Dallas", "json", 8, 14_000, admin}, // fails at its third chunk once, then succeeds
	{"Tarrant", "csv", 4, 9_000, caseWorker("Tarrant")},
}

var (
	admin      = queue.Auth{"role": roleAdmin, "sub": "ada"}
	supervisor = queue.Auth{"role": roleSupervisor, "sub": "sam", "counties": []string{"Harris", "Bexar"}}
)

func caseWorker(county string) queue.Auth {
	return queue.Auth{"role": roleCaseWorker, "sub": "cam", "county": county}
}

const (
	cancelCounty = "Travis"
	flakyCounty  = "Dallas"
)

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	out := flag.String("out", "", "directory for the report files (default a new temporary directory)")
	workers := flag.Int("workers", 2, "jobs the runner works at once")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, *out, *workers); err != nil {
		log.Fatal("reportjobs: ", err)
	}
}

// submission is a job as the program submitted it.
type submission struct {
	CountyReport
	priority int
	entries  int
	role     string
}

func run(ctx context.Context, dsn, out string, workers int) (err error) {
	if out == "" {
		if out, err = os.MkdirTemp("", "sheaf-reportjobs-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	con := &console{}
	// The pool: the runner's four connections (listener, claims,
	// completions, maintenance), one per worker for its handler, and one for
	// this program's own queries.
	edb, err := exampledb.Open(ctx, schema, dsn, 4+workers+1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, edb.Close()) }()
	db, where := edb.DB, edb.Where
	if err := fillEntries(ctx, db); err != nil {
		return err
	}
	fmt.Printf("%s: %d counties of timesheet entries; reports go to %s\n", where, len(plan), out)

	reg := queue.NewRegistry()
	h := &reports{db: db, out: out, chunkSize: chunkSize, renderCost: 25 * time.Millisecond, flaky: flakyCounty, say: con.printf}
	err = queue.RegisterChunked[CountyReport, Entry](reg, h,
		queue.ChunkSize(chunkSize),
		// A short backoff, so the demo's retry comes within a second.
		queue.RetryBackoff(queue.Delays{200 * time.Millisecond}))
	if err != nil {
		return err
	}
	// The demo reports what happens itself; the queue's log only speaks up
	// about real trouble.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := queue.NewClient(db, reg, queue.WithLogger(quiet))
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}

	// Submit every job before the runner starts, so that it chooses among
	// all of them by priority.
	jobs := map[int64]submission{}
	var cancelID, flakyID int64
	for _, p := range plan {
		args := CountyReport{County: p.county, Format: p.format}
		e, err := client.Enqueue(ctx, args, queue.Priority(p.priority), queue.AuthContext(p.auth))
		if err != nil {
			return err
		}
		jobs[e.Job.ID] = submission{args, p.priority, p.entries, p.auth["role"].(string)}
		switch p.county {
		case cancelCounty:
			cancelID = e.Job.ID
		case flakyCounty:
			flakyID = e.Job.ID
		}
	}
	fmt.Printf("submitted %d report jobs; a runner with %d workers takes the highest priority first\n\n", len(plan), workers)

	// The handler says when the job to cancel is half written, so that the
	// cancel lands mid-run however busy the machine is; polling alone could
	// notice too late on a slow day. It says so once: a chunk written
	// before the cancel lands would otherwise have the job cancelled again.
	halfway := make(chan written, 1)
	var told sync.Once
	h.wrote = func(job *queue.Job[CountyReport], records int64) {
		if job.ID == cancelID && 2*records >= int64(jobs[job.ID].entries) {
			told.Do(func() { halfway <- written{job.ID, records} }) // buffered: never blocks
		}
	}

	runner, err := queue.NewRunner(client,
		queue.WithWorkers(workers),
		queue.WithObserver(queue.ObserverFunc(func(ev queue.Event) { con.event(ev, jobs) })))
	if err != nil {
		return err
	}
	con.reset() // times from here on are since the runner started
	if err := runner.Start(ctx); err != nil {
		return err
	}
	watchErr := watch(ctx, client, con, out, jobs, halfway)
	// Stop waits for the handlers, so the cancelled job's cleanup is done
	// when it returns.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := errors.Join(watchErr, runner.Stop(stopCtx)); err != nil {
		return err
	}
	elapsed := con.elapsed()

	recs, err := client.List(ctx, queue.Filter{Kinds: []string{CountyReport{}.Kind()}})
	if err != nil {
		return err
	}
	fmt.Printf("\nall jobs finished in %v\n\n", elapsed.Round(10*time.Millisecond))
	if err := printTable(recs, jobs); err != nil {
		return err
	}
	fmt.Printf("\nreports in %s:\n", out)
	return checkOutput(recs, jobs, out, cancelID, flakyID)
}

// fillEntries creates the source table and fills it: every county's
// entries, made up but the same on every run. The SQL is the same on both
// databases: plain column types (the date is ISO text, 2025-12-01, which
// compares as the date does), and rows numbered by a recursive query, for
// SQLite has no generate_series.
func fillEntries(ctx context.Context, db *gorm.DB) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Exec(`CREATE TABLE timesheet_entries (
			id        bigint       PRIMARY KEY,
			county    text         NOT NULL,
			employee  integer      NOT NULL,
			work_date text         NOT NULL,
			hours     numeric(4,2) NOT NULL,
			project   text         NOT NULL,
			ssn       text         NOT NULL
		)`).Error
		if err != nil {
			return err
		}
		lastID := 0
		for _, p := range plan {
			// Entry n of the county: day 1 to 7 of December, project P-00
			// to P-11, an SSN of the form 123-45-6789. (The parentheses
			// matter: SQLite's || binds tighter than %.)
			err := tx.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
				INSERT INTO timesheet_entries (id, county, employee, work_date, hours, project, ssn)
				SELECT ? + n, ?, 1000 + n * 7 % 250, '2025-12-0' || (1 + n % 7), 4 + n * 37 % 9 * 0.5,
					CASE WHEN n % 12 < 10 THEN 'P-0' ELSE 'P-' END || (n % 12),
					(100 + n * 7 % 800) || '-' || (10 + n % 89) || '-' || (1000 + n * 13 % 9000)
				FROM g`, p.entries, lastID, p.county).Error
			if err != nil {
				return err
			}
			lastID += p.entries
		}
		return tx.Exec("CREATE INDEX timesheet_entries_county_id ON timesheet_entries (county, id)").Error
	})
}
