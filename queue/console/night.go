package console

import (
	"context"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// The overview opens on how the latest run of each schedule went, the
// operator's first question in the morning, before the counts per queue.

// nightRuns is how many of the newest runs the overview looks through
// for each schedule's latest two; maxNights how many schedules it shows.
const (
	nightRuns = 200
	maxNights = 6
)

// nightView is the latest run of a schedule, against the one before it.
type nightView struct {
	// Schedule names the schedule, from its runs' IDs (name@tick).
	Schedule string
	Run      runView
	// Previous is the schedule's run before Run; nil when Run is its
	// first.
	Previous *runView
	// Failed counts Run's FAILED jobs, Groups their groups by error;
	// Slow, NeverRan, Missed and Stopped count the review's slow jobs,
	// jobs that never started, ticks that created nothing and dependency
	// chains that stopped (not those that only wait for their parents).
	Failed, Groups, Slow, NeverRan, Missed, Stopped int
	// Waiting counts Run's jobs that have not finished yet.
	Waiting int64
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
// nightRuns runs, at most maxNights schedules), newest first, and the run
// before it.
func (c *console) latestRuns(ctx context.Context) ([]nightView, error) {
	runs, err := c.client.Runs(ctx, queue.RunsQuery{Limit: nightRuns})
	if err != nil {
		return nil, err
	}
	var out []nightView
	index := map[string]int{}
	for _, s := range runs {
		name := scheduleOf(s.RunID)
		i, seen := index[name]
		switch {
		case !seen && len(out) < maxNights:
			index[name] = len(out)
			out = append(out, nightView{Schedule: name, Run: runOf(s)})
		case seen && out[i].Previous == nil:
			prev := runOf(s)
			out[i].Previous = &prev
		}
	}
	return out, nil
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
	return runView{RunID: s.RunID, Period: s.Period, Total: s.Total, Counts: s.Counts,
		FirstCreatedAt: s.FirstCreated, LastCreatedAt: s.LastCreated}
}

// nights is the overview's last night, reused as long as the counts.
func (c *console) nights(ctx context.Context) ([]nightView, time.Time, error) {
	return c.night.get(ctx, c.cfg.countsTTL, c.lastNight)
}
