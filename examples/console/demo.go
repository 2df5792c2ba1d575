package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
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

// lastNight is the demo's last night: 23:00 UTC yesterday.
func lastNight() time.Time {
	return time.Now().UTC().Add(-24 * time.Hour).Truncate(24 * time.Hour).Add(23 * time.Hour)
}

// registry registers the demo's kinds, its rule and its schedule.
func registry() (*queue.Registry, error) {
	reg := queue.NewRegistry()
	err := errors.Join(
		queue.Register(reg, queue.HandlerFunc[CountyReport](countyReport), queue.RetryBackoff(queue.Delays{time.Hour})),
		queue.Register(reg, queue.HandlerFunc[CountySummary](func(ctx context.Context, j *queue.Job[CountySummary]) error {
			if err := sleep(ctx, 30*time.Millisecond); err != nil {
				return err
			}
			return j.SetOutput(ctx, map[string]string{"summary": j.Args.County + " County, " + j.Args.Date + ": all entries in"})
		})),
		queue.RegisterChunked[Export, int64](reg, exporter{}, queue.OnQueue(exportQueue), queue.ChunkSize(500)),
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
