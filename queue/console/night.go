package console

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// The overview opens on how the latest run of each schedule went, the
// operator's first question in the morning, before the counts per queue.

// nightRuns is how many of the newest runs the overview looks through
// for each schedule's latest two and its usual night; maxNights how many
// schedules it shows.
const (
	nightRuns = 200
	maxNights = 6
	// usualNights is how many earlier runs of a schedule its usual
	// figures are the median of, at most.
	usualNights = 14
)

// nightView is the latest run of a schedule, against the one before it.
type nightView struct {
	// Schedule names the schedule, from its runs' IDs (name@tick).
	Schedule string
	Run      runView
	// Previous is the schedule's run before Run; nil when Run is its
	// first.
	Previous *runView
	// Usual is the median of the schedule's earlier runs (Previous and
	// those before it, of the newest nightRuns runs, at most usualNights):
	// what a night of it usually looks like.
	Usual usualView
	// Failed counts Run's FAILED jobs, Groups their groups by error;
	// Slow, NeverRan, Missed and Stopped count the review's slow jobs,
	// jobs that never started, ticks that created nothing and dependency
	// chains that stopped (not those that only wait for their parents).
	Failed, Groups, Slow, NeverRan, Missed, Stopped int
	// Waiting counts Run's jobs that have not finished yet.
	Waiting int64
}

// usualView is the median of a schedule's earlier runs' counts.
type usualView struct {
	// Runs counts the earlier runs it is the median of; 0 when there is
	// none.
	Runs                     int
	Total, Completed, Failed int64
	// Took is the median wall time of the TookRuns of them that finished.
	Took     time.Duration
	TookRuns int
}

// usualOf is the median of runs' counts, and of the wall times of those
// that finished.
func usualOf(runs []runView) usualView {
	if len(runs) == 0 {
		return usualView{}
	}
	u := usualView{Runs: len(runs),
		Total:     median(runs, func(r runView) int64 { return r.Total }),
		Completed: median(runs, func(r runView) int64 { return r.Counts[queue.StatusCompleted] }),
		Failed:    median(runs, func(r runView) int64 { return r.Counts[queue.StatusFailed] })}
	var done []runView
	for _, r := range runs {
		if r.Done() {
			done = append(done, r)
		}
	}
	if u.TookRuns = len(done); u.TookRuns > 0 {
		u.Took = median(done, runView.Took)
	}
	return u
}

// median is the lower middle of runs' values: one a run had.
func median[V int64 | time.Duration](runs []runView, of func(runView) V) V {
	vs := make([]V, len(runs))
	for i, r := range runs {
		vs[i] = of(r)
	}
	slices.Sort(vs)
	return vs[(len(vs)-1)/2]
}

// Verdict sums the run up in a word: attention (failures, missed ticks
// or stopped chains), underway (jobs left to run) or ok.
func (n nightView) Verdict() string {
	switch {
	case n.Failed > 0 || n.Missed > 0 || n.Stopped > 0:
		return "attention"
	case n.Waiting > 0:
		return "underway"
	}
	return "ok"
}

// scheduleOf is the schedule a run ID names (name@tick), or the ID itself
// for a run no schedule made.
func scheduleOf(runID string) string {
	if i := strings.LastIndexByte(runID, '@'); i > 0 {
		return runID[:i]
	}
	return runID
}

// latestRuns reads the latest run of each schedule (of the newest
// nightRuns runs, at most maxNights schedules), newest first, the run
// before it, and the median of the runs before it.
func (c *console) latestRuns(ctx context.Context) ([]nightView, error) {
	runs, err := c.recentRuns(ctx)
	if err != nil {
		return nil, err
	}
	var out []nightView
	seen := map[string]bool{}
	for i, s := range runs {
		name := scheduleOf(s.RunID)
		if seen[name] {
			continue
		}
		if len(out) == maxNights {
			break
		}
		seen[name] = true
		out = append(out, against(runs, i))
	}
	return out, nil
}

// against is runs[i] beside the runs of its schedule before it in runs
// (newest first): the one just before, and the median of at most
// usualNights of them.
func against(runs []queue.RunSummary, i int) nightView {
	name := scheduleOf(runs[i].RunID)
	n := nightView{Schedule: name, Run: runOf(runs[i])}
	var earlier []runView
	for _, s := range runs[i+1:] {
		if len(earlier) == usualNights {
			break
		}
		if scheduleOf(s.RunID) == name {
			earlier = append(earlier, runOf(s))
		}
	}
	if len(earlier) > 0 {
		n.Previous = &earlier[0]
	}
	n.Usual = usualOf(earlier)
	return n
}

// runTiming is run beside its schedule's runs before it, as the overview
// shows the latest: nil when the run is not among the newest nightRuns.
func (c *console) runTiming(ctx context.Context, run string) (*nightView, error) {
	runs, err := c.recentRuns(ctx)
	if err != nil {
		return nil, err
	}
	for i, s := range runs {
		if s.RunID == run {
			n := against(runs, i)
			return &n, nil
		}
	}
	return nil, nil
}

// lastNight is latestRuns with each latest run's review.
func (c *console) lastNight(ctx context.Context) ([]nightView, error) {
	out, err := c.latestRuns(ctx)
	if err != nil {
		return nil, err
	}
	for i := range out {
		n := &out[i]
		rv, err := c.client.Review(ctx, queue.ReviewQuery{RunID: n.Run.RunID})
		if err != nil {
			return nil, err
		}
		n.Failed, n.Groups = int(rv.Counts[queue.StatusFailed]), len(rv.Failures)
		n.Slow, n.NeverRan = len(rv.Slow)+int(rv.MoreSlow), len(rv.NeverRan)+int(rv.MoreNeverRan)
		n.Missed = len(rv.MissedTicks)
		for _, s := range rv.Stopped {
			var statuses []queue.Status
			for _, b := range s.Blocking {
				statuses = append(statuses, b.Status)
			}
			if !chainWaits(s.MissingKinds, statuses) {
				n.Stopped++
			}
		}
		n.Waiting = rv.Counts[queue.StatusQueued] + rv.Counts[queue.StatusProcessing]
	}
	return out, nil
}

// runOf shows a run's summary.
func runOf(s queue.RunSummary) runView {
	v := runView{RunID: s.RunID, Period: s.Period, Total: s.Total, Counts: s.Counts,
		FirstCreatedAt: s.FirstCreated, LastCreatedAt: s.LastCreated}
	if !s.LastFinished.IsZero() {
		v.LastFinishedAt = &s.LastFinished
	}
	return v
}

// recentRuns reads the newest nightRuns runs, reused as long as the
// counts.
func (c *console) recentRuns(ctx context.Context) ([]queue.RunSummary, error) {
	runs, _, err := c.recent.get(ctx, c.cfg.countsTTL, func(ctx context.Context) ([]queue.RunSummary, error) {
		return c.client.Runs(ctx, queue.RunsQuery{Limit: nightRuns})
	})
	return runs, err
}

// nights is the overview's last night, reused as long as the counts.
func (c *console) nights(ctx context.Context) ([]nightView, time.Time, error) {
	return c.night.get(ctx, c.cfg.countsTTL, c.lastNight)
}
