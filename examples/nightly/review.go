package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// slowFactor flags a job that took three times its kind's typical
// duration. The durations are the database's, from claim to completion, so
// they carry tens of milliseconds of queueing on a busy machine; three times
// is a real outlier here, and no noise.
const slowFactor = 3

// history is how many earlier completed jobs of a kind make its typical
// duration.
const history = 20

// review prints the review of Monday night, headed by what, and returns it
// with the night's jobs.
func (s *story) review(ctx context.Context, what string, runs []queue.Event) (*queue.Review, []queue.JobRecord, error) {
	rv, jobs, err := s.reviewRuns(ctx, runs)
	if err != nil {
		return nil, nil, err
	}
	title := fmt.Sprintf("%s, %s: the night of Monday 1 December 2025", what, s.clock.Now().Format("Mon 2 Jan 2006 15:04 MST"))
	return rv, jobs, printReview(title, runs, rv, jobs)
}

// reviewRuns is the morning review of a night: one Client.Review per run of
// the night (nightly, weekly, monthly), put together, and the night's jobs.
// A dependency child is in the run of the parent that released it, and a
// many-to-one child in the run of whichever parent completed last, so the
// night is the union of its runs.
func (s *story) reviewRuns(ctx context.Context, runs []queue.Event) (*queue.Review, []queue.JobRecord, error) {
	night := &queue.Review{Query: queue.ReviewQuery{SlowFactor: slowFactor, History: history}, Counts: map[queue.Status]int64{}}
	for _, r := range runs {
		rv, err := s.client.Review(ctx, queue.ReviewQuery{RunID: r.RunID, SlowFactor: slowFactor, History: history})
		if err != nil {
			return nil, nil, err
		}
		night.Total += rv.Total
		for st, n := range rv.Counts {
			night.Counts[st] += n
		}
		night.Failed = append(night.Failed, rv.Failed...)
		night.Slow = append(night.Slow, rv.Slow...)
		night.NeverRan = append(night.NeverRan, rv.NeverRan...)
		night.MissedTicks = append(night.MissedTicks, rv.MissedTicks...)
		for _, c := range rv.Stopped {
			// A many-to-one chain shows in the review of each parent's run.
			if !slices.ContainsFunc(night.Stopped, func(o queue.StoppedChain) bool { return o.Rule == c.Rule && o.Group == c.Group }) {
				night.Stopped = append(night.Stopped, c)
			}
		}
	}
	byID := func(a, b queue.JobRecord) int { return int(a.ID - b.ID) }
	slices.SortFunc(night.Failed, byID)
	slices.SortFunc(night.NeverRan, byID)
	slices.SortFunc(night.Slow, func(a, b queue.SlowJob) int { return byID(a.Job, b.Job) })
	jobs, err := jobsOf(ctx, s.client, runs)
	return night, jobs, err
}

// printReview prints the review as the operator reads it in the morning.
func printReview(title string, runs []queue.Event, rv *queue.Review, jobs []queue.JobRecord) error {
	fmt.Println(title)
	perRun := map[string]int{}
	for _, j := range jobs {
		perRun[deref(j.RunID)]++
	}
	var cells []string
	for _, r := range runs {
		cells = append(cells, fmt.Sprintf("%s (%s)", r.RunID, plural(perRun[r.RunID], "job")))
	}
	fmt.Printf("  runs         %s\n", strings.Join(cells, ", "))
	cells = cells[:0]
	for _, st := range queue.Statuses() {
		if n := rv.Counts[st]; n > 0 {
			cells = append(cells, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Printf("  jobs         %d: %s\n", rv.Total, strings.Join(cells, ", "))
	fmt.Printf("  missed ticks %s\n", noneOr(len(rv.MissedTicks), func() string {
		var ts []string
		for _, t := range rv.MissedTicks {
			ts = append(ts, t.RunID)
		}
		return strings.Join(ts, ", ")
	}))
	fmt.Printf("  never ran    %s\n", noneOr(len(rv.NeverRan), func() string { return jobNames(rv.NeverRan) }))

	fmt.Printf("\n  FAILED (%d): read the error, fix the cause, retry\n", len(rv.Failed))
	for _, j := range rv.Failed {
		fmt.Printf("    job %d %s %s, attempt %d of %d: %s\n", j.ID, j.Kind, subject(j), j.Attempts, j.MaxAttempts, deref(j.LastError))
	}
	fmt.Printf("\n  SLOW (%d): %g× or more the median of the kind's last %d completed jobs\n", len(rv.Slow), rv.Query.SlowFactor, rv.Query.History)
	for _, sj := range rv.Slow {
		fmt.Printf("    job %d %s %s took %v; typically %v (%.1f×)\n", sj.Job.ID, sj.Job.Kind, subject(sj.Job),
			sj.Duration.Round(time.Millisecond), sj.Typical.Round(time.Millisecond), float64(sj.Duration)/float64(sj.Typical))
	}
	fmt.Printf("\n  STOPPED CHAINS (%d): jobs not released because a parent did not complete\n", len(rv.Stopped))
	for _, c := range rv.Stopped {
		why := []string{}
		for _, b := range c.Blocking {
			why = append(why, fmt.Sprintf("job %d %s %s is %s", b.ID, b.Kind, subject(b), b.Status))
		}
		for _, k := range c.MissingKinds {
			why = append(why, "no "+k+" job at all")
		}
		fmt.Printf("    %s (rule %s, %s) waits: %s\n", c.ChildKind, c.Rule, c.Group, strings.Join(why, "; "))
	}

	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  JOB\tKIND\tSUBJECT\tRUN\tSTATUS\tATTEMPTS\tDURATION\tPARENTS\tLAST ERROR")
	for _, j := range jobs {
		run, _, _ := strings.Cut(deref(j.RunID), "@")
		parents := "-"
		if len(j.ParentIDs) > 0 {
			parents = strings.Trim(fmt.Sprint([]int64(j.ParentIDs)), "[]")
		}
		dur := "-"
		if d := j.Duration(); d > 0 {
			dur = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.ID, j.Kind, subject(j), run, j.Status, j.Attempts, dur, parents, cmp.Or(deref(j.LastError), "-"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println("  (durations are real time on the database's clock; the night ran on the simulated one)")
	return nil
}

func jobNames(jobs []queue.JobRecord) string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("job %d %s %s", j.ID, j.Kind, subject(j)))
	}
	return strings.Join(out, ", ")
}

func noneOr(n int, describe func() string) string {
	if n == 0 {
		return "none"
	}
	return describe()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// thousands prints n with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// hours prints h to one decimal, with thousands separators.
func hours(h float64) string {
	tenths := int64(h*10 + 0.5)
	return fmt.Sprintf("%s.%d", thousands(tenths/10), tenths%10)
}
