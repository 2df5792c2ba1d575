package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
)

// The night's job kinds. Each names what it is about with Subject, for the
// program's lines and the review.

// CountyReport totals one county's timesheet entries of one day.
type CountyReport struct {
	County string `json:"county"`
	Date   string `json:"date"`
}

func (CountyReport) Kind() string      { return "county_report" }
func (a CountyReport) Subject() string { return a.County }

// CountySummary summarises a county's day from its county report's output;
// the county report releases it (one-to-one).
type CountySummary struct {
	County string `json:"county"`
	Date   string `json:"date"`
}

func (CountySummary) Kind() string      { return "county_summary" }
func (a CountySummary) Subject() string { return a.County }

// WeeklyReport totals the seven days that end on Ending, every county.
type WeeklyReport struct {
	Ending string `json:"week_ending"`
}

func (WeeklyReport) Kind() string      { return "weekly_report" }
func (a WeeklyReport) Subject() string { return "week to " + a.Ending }

// MonthlyReport totals one calendar month, every county.
type MonthlyReport struct {
	Month string `json:"month"` // 2006-01
}

func (MonthlyReport) Kind() string      { return "monthly_report" }
func (a MonthlyReport) Subject() string { return a.Month }

// ConsolidatedReport puts a night's weekly and monthly reports together;
// both release it (many-to-one).
type ConsolidatedReport struct {
	Period string `json:"period"`
}

func (ConsolidatedReport) Kind() string      { return "consolidated_report" }
func (a ConsolidatedReport) Subject() string { return a.Period }

type subjectArgs interface {
	queue.Args
	Subject() string
}

// subjects reads a stored job's subject, by kind.
var subjects = map[string]func(json.RawMessage) string{
	CountyReport{}.Kind():       subjectOf[CountyReport],
	CountySummary{}.Kind():      subjectOf[CountySummary],
	WeeklyReport{}.Kind():       subjectOf[WeeklyReport],
	MonthlyReport{}.Kind():      subjectOf[MonthlyReport],
	ConsolidatedReport{}.Kind(): subjectOf[ConsolidatedReport],
}

func subjectOf[A subjectArgs](payload json.RawMessage) string {
	var a A
	if err := json.Unmarshal(payload, &a); err != nil {
		return "?"
	}
	return a.Subject()
}

func subject(r queue.JobRecord) string {
	if f := subjects[r.Kind]; f != nil {
		return f(r.Payload)
	}
	return ""
}

// Totals is what a report leaves for the reports that depend on it.
type Totals struct {
	Entries   int64   `json:"entries"`
	Hours     float64 `json:"hours"`
	Employees int64   `json:"employees"`
}

// CountyDay is a county summary's output.
type CountyDay struct {
	County      string  `json:"county"`
	Date        string  `json:"date"`
	Entries     int64   `json:"entries"`
	HoursPerEmp float64 `json:"hours_per_employee"`
}

// Consolidated is the consolidated report's output.
type Consolidated struct {
	WeekHours  float64 `json:"week_hours"`
	MonthHours float64 `json:"month_hours"`
}

// reports works the night's jobs on the timesheet tables.
type reports struct {
	db *gorm.DB
	// perEntry is what rendering a county report costs per entry, and
	// render what every other report costs: made-up work, so that durations
	// mean something in the review.
	perEntry, render time.Duration
}

func (r *reports) countyReport(ctx context.Context, job *queue.Job[CountyReport]) (string, error) {
	a := job.Args
	var online bool
	if err := r.db.WithContext(ctx).Raw("SELECT online FROM county_sources WHERE county = ?", a.County).Scan(&online).Error; err != nil {
		return "", err
	}
	if !online {
		// Retrying cannot help until someone brings the feed back: fail at
		// once, and let the morning review show it.
		return "", queue.Permanent(fmt.Errorf("the timesheet feed of %s County is offline", a.County))
	}
	t, err := r.totals(ctx, "county = ? AND work_date = ?", a.County, a.Date)
	if err != nil {
		return "", err
	}
	return finishTotals(ctx, job.SetOutput, t, time.Duration(t.Entries)*r.perEntry)
}

func (r *reports) countySummary(ctx context.Context, job *queue.Job[CountySummary]) (string, error) {
	parents, err := job.Parents(ctx)
	if err != nil {
		return "", err
	}
	if len(parents) != 1 || parents[0].Kind != (CountyReport{}).Kind() {
		return "", queue.Permanent(fmt.Errorf("summary of %s released by %d jobs, expected its county report", job.Args.County, len(parents)))
	}
	var t Totals
	if err := json.Unmarshal(parents[0].Output, &t); err != nil || t.Employees == 0 {
		return "", queue.Permanent(fmt.Errorf("county report %d left no totals: %s", parents[0].ID, parents[0].Output))
	}
	if err := pause(ctx, r.render); err != nil {
		return "", err
	}
	out := CountyDay{County: job.Args.County, Date: job.Args.Date, Entries: t.Entries, HoursPerEmp: t.Hours / float64(t.Employees)}
	if err := job.SetOutput(ctx, out); err != nil {
		return "", err
	}
	return fmt.Sprintf("from job %d's output: %d employees, %.1f hours each", parents[0].ID, t.Employees, out.HoursPerEmp), nil
}

func (r *reports) weekly(ctx context.Context, job *queue.Job[WeeklyReport]) (string, error) {
	end, err := time.Parse(time.DateOnly, job.Args.Ending)
	if err != nil {
		return "", queue.Permanent(err)
	}
	t, err := r.totals(ctx, "work_date BETWEEN ? AND ?", end.AddDate(0, 0, -6).Format(time.DateOnly), job.Args.Ending)
	if err != nil {
		return "", err
	}
	return finishTotals(ctx, job.SetOutput, t, r.render)
}

func (r *reports) monthly(ctx context.Context, job *queue.Job[MonthlyReport]) (string, error) {
	first, err := time.Parse("2006-01", job.Args.Month)
	if err != nil {
		return "", queue.Permanent(err)
	}
	t, err := r.totals(ctx, "work_date >= ? AND work_date < ?", first.Format(time.DateOnly), first.AddDate(0, 1, 0).Format(time.DateOnly))
	if err != nil {
		return "", err
	}
	return finishTotals(ctx, job.SetOutput, t, r.render)
}

// finishTotals renders a report of totals t, which takes cost, and leaves
// them as its output.
func finishTotals(ctx context.Context, setOutput func(context.Context, any) error, t Totals, cost time.Duration) (string, error) {
	if err := pause(ctx, cost); err != nil {
		return "", err
	}
	if err := setOutput(ctx, t); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s entries, %s hours", thousands(t.Entries), hours(t.Hours)), nil
}

func (r *reports) consolidated(ctx context.Context, job *queue.Job[ConsolidatedReport]) (string, error) {
	parents, err := job.Parents(ctx)
	if err != nil {
		return "", err
	}
	var out Consolidated
	var ids []int64
	for _, p := range parents {
		var t Totals
		if err := json.Unmarshal(p.Output, &t); err != nil {
			return "", queue.Permanent(fmt.Errorf("parent %d left no totals: %w", p.ID, err))
		}
		switch p.Kind {
		case WeeklyReport{}.Kind():
			out.WeekHours += t.Hours
		case MonthlyReport{}.Kind():
			out.MonthHours += t.Hours
		}
		ids = append(ids, p.ID)
	}
	if out.WeekHours == 0 || out.MonthHours == 0 {
		return "", queue.Permanent(errors.New("consolidated report needs a weekly and a monthly report"))
	}
	if err := pause(ctx, r.render); err != nil {
		return "", err
	}
	if err := job.SetOutput(ctx, out); err != nil {
		return "", err
	}
	return fmt.Sprintf("from jobs %v: week %s hours, month %s hours", ids, hours(out.WeekHours), hours(out.MonthHours)), nil
}

// totals adds up the timesheet entries that where selects.
func (r *reports) totals(ctx context.Context, where string, args ...any) (Totals, error) {
	var t Totals
	err := r.db.WithContext(ctx).Raw(`SELECT count(*) AS entries, coalesce(sum(hours), 0) AS hours,
		count(DISTINCT employee) AS employees FROM timesheet_entries WHERE `+where, args...).Scan(&t).Error
	return t, err
}

// pause stands for the work of rendering a report.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// fillSources creates the source tables: two months of timesheet entries
// for every county, made up but the same on every run, and the state of
// each county's timesheet feed. The SQL is the same on both databases:
// plain column types (the date is ISO text, 2025-12-01, which compares as
// the date does), and rows numbered by a recursive query, for SQLite has no
// generate_series.
func fillSources(ctx context.Context, db *gorm.DB) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, stmt := range []string{
			`CREATE TABLE timesheet_entries (
				county    text         NOT NULL,
				work_date text         NOT NULL,
				employee  integer      NOT NULL,
				hours     numeric(4,2) NOT NULL
			)`,
			`CREATE TABLE county_sources (county text PRIMARY KEY, online boolean NOT NULL)`,
		} {
			if err := tx.Exec(stmt).Error; err != nil {
				return err
			}
		}
		first, last := time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
		for i, county := range counties {
			for day := first; !day.After(last); day = day.AddDate(0, 0, 1) {
				// 150 to 249 entries a day, by some arithmetic on the county
				// and the date.
				err := tx.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
					INSERT INTO timesheet_entries (county, work_date, employee, hours)
					SELECT ?, ?, 1000 + n * 7 % 40, 4 + n * 37 % 9 * 0.5 FROM g`,
					150+(i*31+day.YearDay()*17)%100, county, day.Format(time.DateOnly)).Error
				if err != nil {
					return err
				}
			}
			if err := tx.Exec("INSERT INTO county_sources VALUES (?, ?)", county, true).Error; err != nil {
				return err
			}
		}
		// Contractors' timesheets, imported late, make one county's Monday
		// eight times its usual size, and its report as slow.
		err := tx.Exec(`WITH RECURSIVE contractors(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM contractors WHERE k < 7)
			INSERT INTO timesheet_entries (county, work_date, employee, hours)
			SELECT county, work_date, employee + 40 * k, hours FROM timesheet_entries, contractors
			WHERE county = ? AND work_date = ?`, slowCounty, last.Format(time.DateOnly)).Error
		if err != nil {
			return err
		}
		return tx.Exec("CREATE INDEX timesheet_entries_date_county ON timesheet_entries (work_date, county)").Error
	})
}
