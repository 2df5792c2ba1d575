package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/jobview"
)

func runReview(ctx context.Context, e *env, args []string) error {
	fs, dsn := e.flags("review", "-run ID | -period DATE | -from TIME -to TIME [flags]",
		`The morning review: what ran, what failed, what was slow, what never ran, and the
schedule ticks that created nothing, for one schedule run, one night (the period
a schedule's tick stamps, its local date) or a time range. Run from here, it
knows the ticks the runners recorded but not the program's schedules and
dependency rules, so it lists no ticks that no runner recorded and no stopped
chains; the console of the program itself does.`)
	run := fs.String("run", "", "a schedule run ID")
	period := fs.String("period", "", "a period, 2006-01-02")
	from := fs.String("from", "", "created at or after this time (RFC 3339) or this long ago (24h)")
	to := fs.String("to", "", "created before this time (RFC 3339) or this long ago; default now")
	slow := fs.Float64("slow", 0, "flag completed jobs slower than this many times their kind's typical duration (default 1.5)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := e.parseNone(fs, args); err != nil {
		return err
	}
	q := queue.ReviewQuery{RunID: *run, Period: *period, SlowFactor: *slow}
	var err error
	if q.From, err = when("from", *from); err != nil {
		return err
	}
	if q.To, err = when("to", *to); err != nil {
		return err
	}
	if !q.From.IsZero() && q.To.IsZero() {
		q.To = time.Now()
	}
	given := 0
	for _, set := range []bool{q.RunID != "", q.Period != "", !q.From.IsZero()} {
		if set {
			given++
		}
	}
	if given != 1 {
		return usageError("review: give one of -run, -period or -from")
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	r, err := client.Review(ctx, q)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(reviewView(r))
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "%d jobs:", r.Total)
	for _, s := range sortedStatuses(r.Counts) {
		fmt.Fprintf(w, " %s %d", s, r.Counts[s])
	}
	fmt.Fprintln(w)
	section := func(title string, n int) bool {
		if n > 0 {
			fmt.Fprintf(w, "\n%s (%d):\n", title, n)
		}
		return n > 0
	}
	if section("Failed", len(r.Failed)) {
		for _, j := range r.Failed {
			fmt.Fprintf(w, "  %d\t%s\t%d attempts\t%s\n", j.ID, j.Kind, j.Attempts, oneLine(deref(j.LastError), 80))
		}
	}
	if section("Slow", len(r.Slow)) {
		for _, s := range r.Slow {
			fmt.Fprintf(w, "  %d\t%s\ttook %s\tmedian %s\tp95 %s\n", s.Job.ID, s.Job.Kind, s.Duration.Round(time.Millisecond),
				s.Typical.Round(time.Millisecond), s.P95.Round(time.Millisecond))
		}
	}
	if section("Never ran", len(r.NeverRan)) {
		for _, j := range r.NeverRan {
			fmt.Fprintf(w, "  %d\t%s\t%s\tqueued %s\n", j.ID, j.Kind, j.Queue, j.CreatedAt.Local().Format(time.DateTime))
		}
	}
	if section("Missed ticks", len(r.MissedTicks)) {
		for _, t := range r.MissedTicks {
			fmt.Fprintf(w, "  %s\t%s\n", t.Schedule, t.At.Format(time.RFC3339))
		}
	}
	if section("Stopped chains", len(r.Stopped)) {
		for _, s := range r.Stopped {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%d blocking\n", s.Rule, s.ChildKind, s.Group, len(s.Blocking))
		}
	}
	if r.Total > 0 && len(r.Failed)+len(r.Slow)+len(r.NeverRan)+len(r.MissedTicks)+len(r.Stopped) == 0 {
		fmt.Fprintln(w, "\nNothing to look at.")
	}
	return w.Flush()
}

// reviewJSON is a review as the command prints it: jobs without their
// claims.
type reviewJSON struct {
	Total       int64                  `json:"total"`
	Counts      map[queue.Status]int64 `json:"counts"`
	Failed      []jobview.Job          `json:"failed"`
	Slow        []slowJSON             `json:"slow"`
	NeverRan    []jobview.Job          `json:"never_ran"`
	MissedTicks []queue.Tick           `json:"missed_ticks"`
	Stopped     []stoppedJSON          `json:"stopped"`
}

type stoppedJSON struct {
	Rule         string        `json:"rule"`
	ChildKind    string        `json:"child_kind"`
	Group        string        `json:"group"`
	Blocking     []jobview.Job `json:"blocking"`
	MissingKinds []string      `json:"missing_kinds"`
}

type slowJSON struct {
	Job      jobview.Job   `json:"job"`
	Duration time.Duration `json:"duration_ns"`
	Typical  time.Duration `json:"typical_ns"`
	P95      time.Duration `json:"p95_ns"`
}

func reviewView(r *queue.Review) reviewJSON {
	out := reviewJSON{Total: r.Total, Counts: r.Counts, Failed: views(r.Failed), NeverRan: views(r.NeverRan),
		MissedTicks: append([]queue.Tick{}, r.MissedTicks...), Stopped: []stoppedJSON{}, Slow: []slowJSON{}}
	for _, c := range r.Stopped {
		out.Stopped = append(out.Stopped, stoppedJSON{Rule: c.Rule, ChildKind: c.ChildKind, Group: c.Group,
			Blocking: views(c.Blocking), MissingKinds: c.MissingKinds})
	}
	for _, s := range r.Slow {
		out.Slow = append(out.Slow, slowJSON{Job: jobview.Of(&s.Job, s.Job.Payload), Duration: s.Duration, Typical: s.Typical, P95: s.P95})
	}
	return out
}

func views(recs []queue.JobRecord) []jobview.Job { return jobview.All(recs, stored) }
