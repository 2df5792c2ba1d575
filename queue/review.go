package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// ReviewQuery says what a morning review covers: one run, one period (a
// night: every schedule's run of that local date), or every job created in a
// time range. Give exactly one of RunID, Period or From and To.
type ReviewQuery struct {
	// RunID selects a schedule run and the jobs its jobs released.
	RunID string
	// Period selects every job of a period, as a schedule's tick stamps it
	// (its local date, 2006-01-02), whichever schedule or rule made it.
	Period string
	// From and To bound created_at (From inclusive, To exclusive); they also
	// bound the schedule ticks checked for runs that created nothing. With
	// Period they are optional and bound only those ticks.
	From, To time.Time
	// SlowFactor flags a completed job whose duration exceeds its kind's
	// typical duration by this factor. Default 1.5.
	SlowFactor float64
	// History is how many earlier completed jobs of a kind make its typical
	// (median) duration; once those jobs are pruned, how many days of the
	// kind's roll-ups (the median of their medians). Default 20.
	History int
}

// Review is what ran, what failed and what was slow: the operator's morning
// check after a night of scheduled runs.
type Review struct {
	Query ReviewQuery
	// Total and Counts count the jobs in scope, by status.
	Total  int64
	Counts map[Status]int64
	// Failed lists the FAILED jobs, oldest first, with their errors and
	// attempts.
	Failed []JobRecord
	// Slow lists completed jobs that took SlowFactor times their kind's
	// typical duration, or longer.
	Slow []SlowJob
	// NeverRan lists jobs still QUEUED that have never started.
	NeverRan []JobRecord
	// Retrying lists jobs QUEUED again after a failed attempt: waiting for
	// their retry.
	Retrying []JobRecord
	// MissedTicks lists the schedule ticks in scope that created no job,
	// oldest first: those the tick ledger records as missed or as having
	// created nothing (see Client.Ticks), and the ticks of the registered
	// schedules that were due by now (the client's clock) that no runner
	// has recorded and that have no job.
	MissedTicks []Tick
	// Stopped lists dependency rules whose child was not released because a
	// parent did not complete.
	Stopped []StoppedChain
	// Typical is, for each kind with a completed job in scope, the median
	// duration the slow check compared its jobs with: that of the History
	// earlier completed jobs of the kind, or of its day roll-ups; zero when
	// no earlier job of the kind is known.
	Typical map[string]time.Duration
}

// SlowJob is a job that took much longer than its kind usually does.
type SlowJob struct {
	Job      JobRecord
	Duration time.Duration
	// Typical is the median duration of the kind's earlier completed jobs.
	Typical time.Duration
}

// StoppedChain is a dependency rule whose child is missing, and the parents
// that are why. A parent still QUEUED or PROCESSING counts as blocking too
// (the morning after, that is where the chain stands); its Status tells.
type StoppedChain struct {
	Rule      string
	ChildKind string
	// Group is the period (many-to-one) or "job:<id>" (one-to-one).
	Group string
	// Blocking are the parents that are not COMPLETED; MissingKinds the
	// parent kinds with no job at all in the period. When both are empty,
	// every parent completed and the rule's own function failed to build
	// the child (the runner's log says how).
	Blocking     []JobRecord
	MissingKinds []string
}

// Review reviews the jobs q selects. It reads the jobs in scope and, for
// the slow check, the recent history of their kinds.
func (c *ops) Review(ctx context.Context, q ReviewQuery) (*Review, error) {
	rangeOK := !q.From.IsZero() && !q.To.IsZero() && q.From.Before(q.To)
	switch {
	case q.RunID != "" && q.Period != "":
		return nil, invalid("review takes a RunID or a Period, not both")
	case q.RunID == "" && q.Period == "" && !rangeOK:
		return nil, invalid("review needs a RunID, a Period, or a From before a To")
	}
	if err := checkTexts("ReviewQuery.RunID", q.RunID, "ReviewQuery.Period", q.Period); err != nil {
		return nil, err
	}
	if q.SlowFactor == 0 {
		q.SlowFactor = 1.5
	}
	if q.History == 0 {
		q.History = 20
	}
	if q.SlowFactor < 1 || q.History < 1 {
		return nil, invalid("review: SlowFactor must be at least 1 and History positive")
	}
	rq := operate.ReviewQuery{Scope: store.Filter{RunID: q.RunID, Period: q.Period}, From: q.From, To: q.To,
		SlowFactor: q.SlowFactor, History: q.History}
	timings, now := c.reg.timings(), c.cfg.clock.Now()
	r, err := operate.Reviewer[JobRecord]{Jobs: c.jobs(), Rules: rulesOf(c.reg.rulesFor("")),
		Missed: func(ctx context.Context) ([]operate.Tick, error) {
			return operate.MissedTicks(ctx, c.st, c.db, timings, rq, now)
		},
		Typical: func(ctx context.Context, kind string, before time.Time, days int) (time.Duration, error) {
			return maintain.Typical(ctx, c.st, c.db, kind, before, days)
		}}.Review(ctx, rq)
	if err != nil {
		return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
	}
	return &Review{Query: q, Total: r.Total, Counts: statusCounts(r.Counts), Failed: r.Failed, NeverRan: r.NeverRan,
		Retrying: r.Retrying, Typical: r.Typical,
		Slow:        converted(r.Slow, func(s operate.Slow[JobRecord]) SlowJob { return SlowJob(s) }),
		MissedTicks: converted(r.MissedTicks, func(t operate.Tick) Tick { return Tick(t) }),
		Stopped:     converted(r.Stopped, func(s operate.Stopped[JobRecord]) StoppedChain { return StoppedChain(s) })}, nil
}
