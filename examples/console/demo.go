package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

const (
	workers     = 4
	exportQueue = "exports"
)

// CountyReport is a county's report of a day's timesheets.
type CountyReport struct {
	County string `json:"county"`
	Date   string `json:"date"`
}

func (CountyReport) Kind() string { return "county_report" }

// CountySummary sums up a county's report; the report's completion
// releases it (rule county-summary).
type CountySummary struct {
	County string `json:"county"`
	Date   string `json:"date"`
}

func (CountySummary) Kind() string { return "county_summary" }

// Export writes Rows rows of a table out, chunk by chunk, saving its
// progress after each.
type Export struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
}

func (Export) Kind() string { return "export" }

// The demo's counties. Last night one's feed was offline (its report
// failed for good), one's timed out (its report waits an hour for its
// retry) and one's was slow; the night before, all went well.
var counties = []string{"Travis", "Harris", "Dallas", "Bexar", "El Paso", "Tarrant", "Collin", "Denton"}

const (
	offlineCounty = "El Paso"
	flakyCounty   = "Collin"
	slowCounty    = "Harris"
)

// A report that fails is tried again an hour later, then after 2, 4, 8
// and 16 hours: six attempts, the last more than a day after the first, so
// that a report failing at night is still waiting for its retry whenever
// the demo is looked at the next day (see retriedOvernight).
var reportRetries = queue.Delays{time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 16 * time.Hour}

const reportAttempts = 6

// lastNight is the demo's last night: 23:00 UTC yesterday.
func lastNight() time.Time {
	return time.Now().UTC().Add(-24 * time.Hour).Truncate(24 * time.Hour).Add(23 * time.Hour)
}

// registry registers the demo's kinds, its rule and its schedule.
func registry() (*queue.Registry, error) {
	reg := queue.NewRegistry()
	err := errors.Join(
		queue.Register(reg, queue.HandlerFunc[CountyReport](countyReport), queue.RetryBackoff(reportRetries),
			queue.MaxAttempts(reportAttempts)),
		queue.Register(reg, queue.HandlerFunc[CountySummary](func(ctx context.Context, j *queue.Job[CountySummary]) error {
			if err := sleep(ctx, 30*time.Millisecond); err != nil {
				return err
			}
			return j.SetOutput(ctx, map[string]string{"summary": j.Args.County + " County, " + j.Args.Date + ": all entries in"})
		})),
		// At most two exports at once, across every runner.
		queue.RegisterChunked[Export, int64](reg, exporter{}, queue.OnQueue(exportQueue), queue.ChunkSize(500),
			queue.KindLimit(queue.Limits{Concurrency: 2})),
	)
	if err != nil {
		return nil, err
	}
	return reg, errors.Join(
		queue.Depend(reg, queue.Rule{Name: "county-summary", Parents: []string{CountyReport{}.Kind()}, Each: true},
			func(parents []queue.JobRecord) (CountySummary, []queue.EnqueueOption) {
				var c CountySummary
				_ = json.Unmarshal(parents[0].Payload, &c) // a CountyReport: the fields fit
				return c, nil
			}),
		reg.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0),
			Jobs: func(t queue.Tick) []queue.Params {
				jobs := make([]queue.Params, len(counties))
				for i, c := range counties {
					jobs[i] = queue.Params{Args: CountyReport{County: c, Date: t.Period}}
				}
				return jobs
			}}),
	)
}

func countyReport(ctx context.Context, j *queue.Job[CountyReport]) error {
	// Long enough that a busy machine's delays, tens of milliseconds, do
	// not make a usual report look slow beside the night before's; the
	// slow one fifteen times as long, so that it stands out even when a
	// busy machine has stretched the usual ones severalfold.
	took := 200 * time.Millisecond
	if j.Args.Date == lastNight().Format(time.DateOnly) {
		switch j.Args.County {
		case offlineCounty:
			return queue.Permanent(fmt.Errorf("the timesheet feed of %s County is offline", j.Args.County))
		case flakyCounty:
			// 30 s, once the night is stretched (nightScale).
			if err := sleep(ctx, 15*time.Millisecond); err != nil {
				return err
			}
			return fmt.Errorf("read timesheets of %s County: upstream timed out after 30s", j.Args.County)
		case slowCounty:
			took = 3 * time.Second
		}
	}
	if err := sleep(ctx, took); err != nil {
		return err
	}
	return j.SetOutput(ctx, map[string]int{"entries": 1000 + 37*len(j.Args.County)})
}

// exporter exports rows that it makes up, 20ms a chunk.
type exporter struct{}

func (exporter) Records(_ context.Context, j *queue.Job[Export]) (int64, iter.Seq2[int64, error], error) {
	return j.Args.Rows, func(yield func(int64, error) bool) {
		for i := range j.Args.Rows {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}

func (exporter) ProcessChunk(ctx context.Context, _ *queue.Job[Export], _ batch.Batch[int64]) error {
	return sleep(ctx, 20*time.Millisecond)
}

func (exporter) Cleanup(context.Context, *queue.Job[Export]) error { return nil }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}

// fill submits the last two nights' jobs, as the nightly schedule's ticks
// at 23:00 UTC would have, and some of the day's: exports, one cancelled,
// one for tomorrow. Last night's are due a few seconds after the night
// before's, so that the night before has finished when they start: the
// review compares each report's time with it. It returns how many jobs it
// submitted.
func fill(ctx context.Context, c *queue.Client) (int, error) {
	night := lastNight()
	var jobs []queue.Params
	for i, n := range []time.Time{night.Add(-24 * time.Hour), night} {
		period := n.Format(time.DateOnly)
		run := "nightly@" + n.Format(time.RFC3339)
		for _, county := range counties {
			opts := []queue.EnqueueOption{queue.InRun(run), queue.InPeriod(period), queue.IdempotencyKey(run + "/" + county)}
			if i > 0 {
				opts = append(opts, queue.RunAt(time.Now().Add(3*time.Second)))
			}
			jobs = append(jobs, queue.Params{Args: CountyReport{County: county, Date: period}, Options: opts})
		}
	}
	for _, table := range []string{"timesheet_entries", "employees", "payroll"} {
		jobs = append(jobs, queue.Params{Args: Export{Table: table, Rows: 5000}})
	}
	// Tomorrow's night, not tonight's: from 23:00 UTC tonight's is due.
	tomorrow := queue.RunAt(night.Add(48 * time.Hour))
	jobs = append(jobs,
		queue.Params{Args: Export{Table: "audit_trail", Rows: 2000}, Options: []queue.EnqueueOption{tomorrow}},
		queue.Params{Args: Export{Table: "old_payroll", Rows: 9000}, Options: []queue.EnqueueOption{tomorrow}},
	)
	for _, p := range jobs {
		if _, err := c.Enqueue(ctx, p.Args, p.Options...); err != nil {
			return 0, err
		}
	}
	// The last export was a mistake: cancel it before it runs.
	last, err := c.List(ctx, queue.Filter{Kinds: []string{Export{}.Kind()}, Newest: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	if _, err := c.Cancel(ctx, last[0].ID); err != nil {
		return 0, err
	}
	return len(jobs), nil
}

// nightScale is how many times longer the demo's nights look than they
// took: a night of reports runs here in seconds, and reads as a night's
// hour or two.
const nightScale = 2000

// backdate waits for the two nights' jobs to have run (last night's
// retrying report to have failed its first attempt), then moves each
// night to when the schedule's tick would have run it: its times, from
// the night's first due job on, stretched nightScale times from 23:00 UTC.
// The pages then read as they would the morning after, "finished 01:12,
// took 1 h 50 min". It writes the queue's tables directly, which only a
// demo has reason to do.
func backdate(ctx context.Context, c *queue.Client, db *gorm.DB) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	night := lastNight()
	ticks := []time.Time{night.Add(-24 * time.Hour), night}
	byRun := map[time.Time][]queue.JobRecord{}
	for _, tick := range ticks {
		for {
			jobs, err := c.List(ctx, queue.Filter{RunID: "nightly@" + tick.Format(time.RFC3339), Limit: 100})
			if err != nil {
				return err
			}
			if nightRan(jobs) {
				byRun[tick] = jobs
				break
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for the night of %s to run: %w", tick.Format(time.DateOnly), err)
			}
		}
	}
	at := func(t time.Time) any { return t }
	if db.Dialector.Name() == "sqlite" {
		at = func(t time.Time) any { return t.UTC().Format(sqlitedb.TimeLayout) }
	}
	now := time.Now()
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, tick := range ticks {
			jobs := byRun[tick]
			first := jobs[0].RunAt
			for _, j := range jobs {
				if j.RunAt.Before(first) {
					first = j.RunAt
				}
			}
			// Stretched less when the night began so recently that its
			// stretched times would pass now (shortly after midnight UTC):
			// every time moved is before now, and so is tick + 0.9 of
			// (now - tick).
			scale := min(float64(nightScale), 0.9*float64(now.Sub(tick))/float64(max(now.Sub(first), time.Millisecond)))
			moved := func(t time.Time) time.Time {
				return tick.Add(time.Duration(float64(max(0, t.Sub(first))) * scale))
			}
			last := tick
			for _, j := range jobs {
				runAt := j.RunAt
				if j.Status != queue.StatusQueued { // a retry's due time stays ahead
					runAt = moved(j.RunAt)
				}
				var started, completed any
				if j.StartedAt != nil {
					started = at(moved(*j.StartedAt))
				}
				if j.CompletedAt != nil {
					completed = at(moved(*j.CompletedAt))
				}
				if c := moved(j.CreatedAt); c.After(last) {
					last = c
				}
				if err := tx.Exec("UPDATE sheaf_jobs SET created_at = ?, run_at = ?, started_at = ?, completed_at = ? WHERE id = ?",
					at(moved(j.CreatedAt)), at(runAt), started, completed, j.ID).Error; err != nil {
					return err
				}
				attempts, err := c.Attempts(ctx, j.ID)
				if err != nil {
					return err
				}
				for _, a := range attempts {
					if a.FinishedAt == nil {
						continue
					}
					if err := tx.Exec("UPDATE sheaf_attempts SET started_at = ?, finished_at = ? WHERE job_id = ? AND claim = ?",
						at(moved(a.StartedAt)), at(moved(*a.FinishedAt)), j.ID, a.Number).Error; err != nil {
						return err
					}
				}
				if j.Status == queue.StatusQueued && len(attempts) > 0 && attempts[len(attempts)-1].FinishedAt != nil {
					if err := retriedOvernight(tx, at, j.ID, attempts[len(attempts)-1], moved); err != nil {
						return err
					}
				}
			}
			// The run's counts, if the maintenance leader kept them, are
			// counted again, with its new finish.
			if err := tx.Exec("UPDATE sheaf_runs SET first_created = ?, last_created = ?, counts = NULL WHERE run_id = ?",
				at(tick), at(last), "nightly@"+tick.Format(time.RFC3339)).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// retriedOvernight gives a job waiting for its retry, whose attempt a
// moved to last night, the attempts its backoff would have made since,
// each ending as a did, and the due time of the next: the retry a runner
// would be waiting for now. Without them it would read as failed at night
// and due again an hour from now, whenever now is.
func retriedOvernight(tx *gorm.DB, at func(time.Time) any, id int64, a queue.Attempt, moved func(time.Time) time.Time) error {
	start, end := moved(a.StartedAt), moved(*a.FinishedAt)
	took := end.Sub(start)
	n := a.Number
	due := end.Add(reportRetries.Delay(n))
	now := time.Now()
	for due.Before(now) && n+1 < reportAttempts {
		n++
		start, end = due, due.Add(took)
		if !end.Before(now) { // the attempt began just before now: it ends before now too
			end = start.Add(now.Sub(start) / 2)
		}
		if err := tx.Exec("INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
			id, n, a.Runner, at(start), at(end), queue.OutcomeRetried, a.Error).Error; err != nil {
			return err
		}
		due = end.Add(reportRetries.Delay(n))
	}
	return tx.Exec("UPDATE sheaf_jobs SET attempts = ?, claims = ?, started_at = ?, run_at = ? WHERE id = ?",
		n, n, at(start), at(due), id).Error
}

// nightRan reports whether a night's jobs have run: its reports are all
// in, and none of its jobs is running or yet to start (a report waiting
// for its retry has started once).
func nightRan(jobs []queue.JobRecord) bool {
	reports := 0
	for _, j := range jobs {
		if j.Kind == (CountyReport{}).Kind() {
			reports++
		}
		if j.Status == queue.StatusProcessing || j.Status == queue.StatusQueued && j.Attempts == 0 {
			return false
		}
	}
	return reports == len(counties)
}
