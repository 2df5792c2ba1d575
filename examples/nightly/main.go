// Command nightly runs a nightly batch of reports on sheaf's job queue, on an
// accelerated clock, so that a night and the morning after take seconds.
//
// Simulated time starts on Sunday 30 November 2025 at 22:59:50 in Kolkata.
// At 23:00 the nightly schedule creates a report per county; each county
// report that completes releases its county summary (a one-to-one rule).
// That night gives the kinds a typical duration. The clock then moves to
// Monday 1 December, 22:59:50: a Monday and the 1st of a month, so at 23:00
// the nightly, weekly and monthly schedules all fire. The weekly and the
// monthly report together release the consolidated report (many-to-one).
// One county's timesheet feed is offline, so its report fails and its summary
// waits; another county's report is slow. On Tuesday at 08:00 the program
// prints the morning review, brings the feed back, retries the run's failed
// jobs in one call, and prints the review again, with everything completed.
//
//	go run ./examples/nightly [-dsn URL] [-speed 60]
//
// Without -dsn or DATABASE_URL, it works in a new SQLite file in a
// temporary folder, which it removes at the end. With a postgres:// URL, it
// works in a schema of its own, sheaf_example_nightly, which it drops and
// recreates at start. It exits non-zero if the night does not go as planned.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"
	_ "time/tzdata" // Asia/Kolkata, whether or not the system has a zone database

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
)

const (
	schema  = "sheaf_example_nightly"
	workers = 4
	zone    = "Asia/Kolkata"
)

var counties = []string{"Bexar", "Dallas", "Harris", "Tarrant", "Travis"}

const (
	slowCounty = "Harris" // late-imported timesheets make its Monday eight times its usual size
	downCounty = "Travis" // its timesheet feed is offline on Monday night
)

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	speed := flag.Int("speed", 60, "simulated seconds per real second")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	if *speed < 1 {
		log.Fatal("nightly: -speed must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, *speed); err != nil {
		log.Fatal("nightly: ", err)
	}
}

// story is the demonstration's state: the queue, the clock and what has
// been seen.
type story struct {
	loc    *time.Location
	db     *gorm.DB
	clock  *fastClock
	night  *night
	client *queue.Client
	runner *queue.Runner
}

func run(ctx context.Context, dsn string, speed int) (err error) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return err
	}
	// The pool: the runner's four connections (listener, claims,
	// completions, maintenance), one per worker for its handler, and one for
	// this program's own queries.
	edb, err := exampledb.Open(ctx, schema, dsn, 4+workers+1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, edb.Close()) }()
	db, where := edb.DB, edb.Where
	if err := fillSources(ctx, db); err != nil {
		return err
	}
	s := &story{loc: loc, db: db, clock: newFastClock(time.Date(2025, 11, 30, 22, 59, 50, 0, loc), speed)}
	defer s.clock.stop()
	s.night = newNight(s.clock)
	reg, window, err := s.registry()
	if err != nil {
		return err
	}
	// The program tells what happens itself; the queue's log only speaks up
	// about trouble, such as the dead letter the story plans, and does so
	// in the story's stream, where it falls in place.
	quiet := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelError}))
	if s.client, err = queue.NewClient(db, reg, queue.WithLogger(quiet)); err != nil {
		return err
	}
	if err := s.client.Migrate(ctx); err != nil {
		return err
	}
	s.runner, err = queue.NewRunner(s.client,
		queue.WithClock(s.clock),
		queue.WithWorkers(workers),
		queue.WithObserver(s.night))
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d counties of timesheet entries, October to December 2025\n", where, len(counties))
	fmt.Printf("simulated clock in %s, %d× real time; batch window %v for the weekly, monthly and consolidated reports\n\n",
		zone, speed, window)

	var p problems
	err = s.tell(ctx, &p)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := errors.Join(err, s.runner.Stop(stopCtx)); err != nil {
		return err
	}
	return p.err()
}

// registry registers the night's kinds, schedules and dependency rules.
func (s *story) registry() (*queue.Registry, queue.Window, error) {
	reg := queue.NewRegistry()
	window, err := queue.DailyWindow("23:00", "05:00", s.loc)
	if err != nil {
		return nil, window, err
	}
	r := &reports{db: s.db, perEntry: time.Millisecond, render: 40 * time.Millisecond}
	n := s.night
	heavy := queue.During(window) // the all-county reports run only at night
	err = errors.Join(
		queue.Register(reg, handle(n, r.countyReport)),
		queue.Register(reg, handle(n, r.countySummary)),
		queue.Register(reg, handle(n, r.weekly), heavy),
		queue.Register(reg, handle(n, r.monthly), heavy),
		queue.Register(reg, handle(n, r.consolidated), heavy),
	)
	if err != nil {
		return nil, window, err
	}
	err = errors.Join(
		queue.Depend(reg, queue.Rule{Name: "county-summary", Parents: []string{CountyReport{}.Kind()}, Each: true},
			func(parents []queue.JobRecord) (CountySummary, []queue.EnqueueOption) {
				// The parent's payload is a CountyReport, so its fields fit.
				var c CountySummary
				_ = json.Unmarshal(parents[0].Payload, &c)
				return c, nil
			}),
		queue.Depend(reg, queue.Rule{Name: "consolidated", Parents: []string{WeeklyReport{}.Kind(), MonthlyReport{}.Kind()}},
			func(parents []queue.JobRecord) (ConsolidatedReport, []queue.EnqueueOption) {
				return ConsolidatedReport{Period: *parents[0].Period}, nil
			}),
		reg.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0), Location: s.loc,
			Jobs: func(t queue.Tick) []queue.Params {
				jobs := make([]queue.Params, len(counties))
				for i, c := range counties {
					jobs[i] = queue.Params{Args: CountyReport{County: c, Date: t.Period}}
				}
				return jobs
			}}),
		reg.Schedule(queue.Periodic{Name: "weekly", Spec: queue.Weekly(time.Monday, 23, 0), Location: s.loc,
			Jobs: func(t queue.Tick) []queue.Params {
				return []queue.Params{{Args: WeeklyReport{Ending: t.Period}}}
			}}),
		reg.Schedule(queue.Periodic{Name: "monthly", Spec: queue.Monthly(1, 23, 0), Location: s.loc,
			Jobs: func(t queue.Tick) []queue.Params {
				// On the 1st, the month that has just ended.
				return []queue.Params{{Args: MonthlyReport{Month: t.At.AddDate(0, 0, -1).Format("2006-01")}}}
			}}),
	)
	return reg, window, err
}
