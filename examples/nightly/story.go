package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// tell runs the story: Sunday night, Monday night, Tuesday morning. What
// does not go as planned is added to p; an error is returned when the story
// cannot go on.
func (s *story) tell(ctx context.Context, p *problems) error {
	n := s.night
	sunday := time.Date(2025, 11, 30, 23, 0, 0, 0, s.loc)

	// Sunday evening, ten seconds before the window opens. The clock
	// stands still until the runner is up, so the first tick comes after
	// its schedules start at any speed.
	e, err := s.client.Enqueue(ctx, MonthlyReport{Month: "2025-10"})
	if err != nil {
		return err
	}
	october := e.Job.ID
	n.submitted(e.Job)
	n.say("an analyst asks for October's monthly report again: job %d, which waits for the batch window", october)
	if err := s.runner.Start(ctx); err != nil {
		return err
	}
	// The runner waits on the clock once it has read its schedules.
	select {
	case <-s.clock.waiting:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(time.Minute):
		return errors.New("the runner's scheduler did not start within a minute")
	}
	s.clock.run()
	if _, err := n.settle(ctx, s.client, "Sunday night", 1); err != nil {
		return err
	}
	if at := n.started(october); at.Before(sunday) {
		p.add("job %d (monthly_report) started at %s, before the batch window opened", october, at.Format("15:04:05"))
	} else {
		n.say("job %d monthly_report 2025-10 had waited for the window: it started at %s", october, at.Format("15:04:05"))
	}
	sundayRuns := n.scheduled()
	typical, err := s.checkSunday(ctx, sundayRuns, october, p)
	if err != nil {
		return err
	}

	// Monday: a day later, ten seconds before the window opens again.
	fmt.Println()
	if err := s.setFeed(ctx, downCounty, false); err != nil {
		return err
	}
	s.clock.Set(sunday.AddDate(0, 0, 1).Add(-10 * time.Second))
	n.say("a day later: the timesheet feed of %s County went down this afternoon, and is still down", downCounty)
	if _, err := n.settle(ctx, s.client, "Monday night", len(sundayRuns)+3); err != nil {
		return err
	}
	runs := n.scheduled()[len(sundayRuns):]

	// Tuesday morning.
	s.clock.Set(sunday.AddDate(0, 0, 1).Add(9 * time.Hour))
	fmt.Println()
	before, jobs, err := s.review(ctx, "MORNING REVIEW", runs)
	if err != nil {
		return err
	}
	checkMorning(runs, before, jobs, typical, p)

	fmt.Println()
	if err := s.setFeed(ctx, downCounty, true); err != nil {
		return err
	}
	n.say("the operator brings the timesheet feed of %s County back", downCounty)
	i := slices.IndexFunc(runs, func(r queue.Event) bool { return r.Schedule == "nightly" })
	if i < 0 {
		return errors.New("no nightly run on Monday to retry")
	}
	nightly := runs[i].RunID
	retried, err := s.client.RetryFailed(ctx, queue.Filter{RunID: nightly})
	if err != nil {
		return err
	}
	n.say("RetryFailed(run %s) requeued %d job(s)", nightly, retried)
	p.check(retried == 1, "RetryFailed requeued %d jobs; expected 1", retried)
	if _, err := n.settle(ctx, s.client, "the retry", len(sundayRuns)+3); err != nil {
		return err
	}
	fmt.Println()
	after, jobs, err := s.review(ctx, "REVIEW AFTER THE RETRY", runs)
	if err != nil {
		return err
	}
	checkRetried(before, after, jobs, p)
	return nil
}

func (s *story) setFeed(ctx context.Context, county string, online bool) error {
	return s.db.WithContext(ctx).Exec("UPDATE county_sources SET online = ? WHERE county = ?", online, county).Error
}

// checkSunday checks the first night: one nightly run, every county's
// report and summary completed, and the analyst's job done. It returns the
// median duration of the county reports, which the review will take as
// typical.
func (s *story) checkSunday(ctx context.Context, runs []queue.Event, october int64, p *problems) (time.Duration, error) {
	if len(runs) != 1 || runs[0].Schedule != "nightly" {
		p.add("Sunday night started %d runs; expected the nightly one only", len(runs))
	}
	jobs, err := jobsOf(ctx, s.client, runs)
	if err != nil {
		return 0, err
	}
	byKind := map[string]int{}
	var took []time.Duration
	for _, j := range jobs {
		p.check(j.Status == queue.StatusCompleted, "Sunday: job %d %s %s is %s", j.ID, j.Kind, subject(j), j.Status)
		byKind[j.Kind]++
		if j.Kind == (CountyReport{}).Kind() {
			took = append(took, j.Duration())
		}
	}
	slices.Sort(took)
	p.check(byKind[CountyReport{}.Kind()] == len(counties) && byKind[CountySummary{}.Kind()] == len(counties),
		"Sunday: jobs by kind %v; expected %d county reports and %d summaries", byKind, len(counties), len(counties))
	checkSummaries(jobs, p)
	rec, err := s.client.Get(ctx, october)
	if err != nil {
		return 0, err
	}
	p.check(rec.Status == queue.StatusCompleted, "Sunday: the analyst's job %d is %s", october, rec.Status)
	if len(took) == 0 {
		return 0, nil
	}
	return took[len(took)/2], nil
}

// checkMorning checks the first review: Monday's three runs, one failed
// county report and its stopped summary, the slow county, and the
// consolidated report released by the weekly and monthly ones.
func checkMorning(runs []queue.Event, rv *queue.Review, jobs []queue.JobRecord, typical time.Duration, p *problems) {
	var names []string
	for _, r := range runs {
		names = append(names, r.Schedule)
		p.check(strings.HasSuffix(r.RunID, "@2025-12-01T23:00:00+05:30"), "run %s is not Monday 23:00's", r.RunID)
	}
	slices.Sort(names)
	p.check(slices.Equal(names, []string{"monthly", "nightly", "weekly"}), "Monday's runs: %v; expected nightly, weekly and monthly", names)
	want := 2*len(counties) - 1 + 3 // county reports, the summaries but one, weekly, monthly, consolidated
	p.check(rv.Total == int64(want) && rv.Counts[queue.StatusCompleted] == int64(want-1) && rv.Counts[queue.StatusFailed] == 1,
		"morning: %d jobs %v; expected %d, one of them FAILED", rv.Total, rv.Counts, want)
	// Its first attempt fails for good, unless the database turned it away
	// first (a busy server, say): then it is retried, and fails on the next.
	if len(rv.Failed) != 1 || subject(rv.Failed[0]) != downCounty ||
		rv.Failed[0].LastError == nil || !strings.Contains(*rv.Failed[0].LastError, "offline") {
		p.add("morning: failed jobs %s; expected %s's county report, failed as its feed is offline", list(rv.Failed), downCounty)
	}
	if !slices.ContainsFunc(rv.Slow, func(sj queue.SlowJob) bool {
		return sj.Job.Kind == CountyReport{}.Kind() && subject(sj.Job) == slowCounty
	}) {
		// Durations are real: on a machine busy enough to slow Sunday's
		// reports to a third of Harris's, it does not stand out. Only a
		// review that misses a job that did is wrong.
		i := slices.IndexFunc(jobs, func(j queue.JobRecord) bool {
			return j.Kind == CountyReport{}.Kind() && subject(j) == slowCounty
		})
		if i < 0 || float64(jobs[i].Duration()) >= slowFactor*float64(typical) {
			p.add("morning: %s's county report is not among the slow jobs (Sunday's typical: %v)", slowCounty, typical)
		} else {
			fmt.Printf("note: the machine is busy: %s's report took %v, under %d× Sunday's typical %v, so it is not slow\n",
				slowCounty, jobs[i].Duration().Round(time.Millisecond), slowFactor, typical.Round(time.Millisecond))
		}
	}
	if len(rv.Stopped) != 1 || rv.Stopped[0].Rule != "county-summary" || len(rv.Stopped[0].Blocking) != 1 ||
		subject(rv.Stopped[0].Blocking[0]) != downCounty {
		p.add("morning: %d stopped chains; expected %s's summary, waiting on its failed report", len(rv.Stopped), downCounty)
	}
	p.check(len(rv.NeverRan) == 0 && len(rv.MissedTicks) == 0, "morning: %d jobs never ran and %d ticks were missed; expected none",
		len(rv.NeverRan), len(rv.MissedTicks))
	checkConsolidated(jobs, p)
	checkSummaries(jobs, p)
}

// checkRetried checks the review after the retry: the failed report and its
// summary completed, nothing else changed.
func checkRetried(before, after *queue.Review, jobs []queue.JobRecord, p *problems) {
	p.check(after.Total == before.Total+1 && after.Counts[queue.StatusCompleted] == after.Total,
		"after the retry: %d jobs %v; expected %d, all COMPLETED", after.Total, after.Counts, before.Total+1)
	p.check(len(after.Failed) == 0 && len(after.Stopped) == 0 && len(after.NeverRan) == 0,
		"after the retry: %d failed, %d stopped chains, %d never ran; expected none", len(after.Failed), len(after.Stopped), len(after.NeverRan))
	summaries := 0
	for _, j := range jobs {
		if j.Kind == (CountySummary{}).Kind() && subject(j) == downCounty {
			summaries++
		}
	}
	p.check(summaries == 1, "after the retry: %d summaries of %s; expected 1", summaries, downCounty)
	checkSummaries(jobs, p)
}

// checkSummaries checks every completed county summary against the county
// report that released it: same county, and the entries its output read.
func checkSummaries(jobs []queue.JobRecord, p *problems) {
	byID := map[int64]queue.JobRecord{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	for _, j := range jobs {
		if j.Kind != (CountySummary{}).Kind() || j.Status != queue.StatusCompleted {
			continue
		}
		parent, ok := byID[firstOr0(j.ParentIDs)]
		var day CountyDay
		var t Totals
		_ = json.Unmarshal(j.Output, &day)
		_ = json.Unmarshal(parent.Output, &t)
		if !ok || len(j.ParentIDs) != 1 || parent.Kind != (CountyReport{}).Kind() || subject(parent) != subject(j) || day.Entries != t.Entries || t.Entries == 0 {
			p.add("summary %d (%s) does not match the county report that released it (%v)", j.ID, subject(j), j.ParentIDs)
		}
	}
}

// checkConsolidated checks that one consolidated report completed, released
// by the night's weekly and monthly reports.
func checkConsolidated(jobs []queue.JobRecord, p *problems) {
	var parents []int64
	var consolidated []queue.JobRecord
	for _, j := range jobs {
		switch j.Kind {
		case WeeklyReport{}.Kind(), MonthlyReport{}.Kind():
			parents = append(parents, j.ID)
		case ConsolidatedReport{}.Kind():
			consolidated = append(consolidated, j)
		}
	}
	if len(consolidated) != 1 || consolidated[0].Status != queue.StatusCompleted || !slices.Equal(consolidated[0].ParentIDs, parents) {
		p.add("consolidated reports %s; expected one, COMPLETED, released by jobs %v", list(consolidated), parents)
	}
}

func firstOr0(ids []int64) int64 {
	if len(ids) == 0 {
		return 0
	}
	return ids[0]
}

// list names jobs for a problem report.
func list(jobs []queue.JobRecord) string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("%d %s %s %s (parents %v)", j.ID, j.Kind, subject(j), j.Status, j.ParentIDs))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// problems collects what did not go as planned.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p *problems) check(ok bool, format string, args ...any) {
	if !ok {
		p.add(format, args...)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("the night did not go as planned:\n  %s", strings.Join(p, "\n  "))
}
