package queue

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
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
	// Limit bounds each list of jobs (Failed, Slow, NeverRan, a rule's
	// Stopped, a chain's Blocking); the Review counts the rest in its
	// More fields. Default 100, at most 10,000.
	Limit int
}

// failureSamples is how many job IDs a failure group names.
const failureSamples = 10

// Review is what ran, what failed and what was slow: the operator's morning
// check after a night of scheduled runs. The database counts, groups and
// picks, so a review returns counts and bounded lists whatever the size of
// the night: each list holds at most Query.Limit jobs, oldest first, and
// its More field says how many more there are ("and N more").
type Review struct {
	Query ReviewQuery
	// Total and Counts count the jobs in scope, by status.
	Total  int64
	Counts map[Status]int64
	// Failed lists the first FAILED jobs, oldest first, with their errors
	// and attempts; MoreFailed counts the rest.
	Failed     []JobRecord
	MoreFailed int64
	// Failures groups every FAILED job by the shape of its last error
	// (IDs, hex strings and numbers taken out), the largest group first.
	Failures []FailureGroup
	// Slow lists completed jobs that took SlowFactor times their kind's
	// typical duration, or longer; MoreSlow counts the rest.
	Slow     []SlowJob
	MoreSlow int64
	// NeverRan lists jobs still QUEUED that have never started;
	// MoreNeverRan counts the rest.
	NeverRan     []JobRecord
	MoreNeverRan int64
	// Retrying lists jobs QUEUED again after a failed attempt, waiting
	// for their retry; MoreRetrying counts the rest.
	Retrying     []JobRecord
	MoreRetrying int64
	// MissedTicks lists the schedule ticks in scope that created no job,
	// oldest first: those the tick ledger records as missed or as having
	// created nothing (see Client.Ticks), and the ticks of the registered
	// schedules that were due by now (the client's clock) that no runner
	// has recorded and that have no job.
	MissedTicks []Tick
	// Stopped lists dependency rules whose child was not released because a
	// parent did not complete, at most Limit a rule; MoreStopped counts
	// the one-to-one rules' groups past them.
	Stopped     []StoppedChain
	MoreStopped int64
	// Typical is, for each kind with a completed job in scope, what the
	// slow check compared its jobs with: the median (and 95th percentile)
	// run time of the History earlier completed jobs of the kind, or of
	// its day roll-ups.
	Typical map[string]Baseline
}

// FailureGroup is the FAILED jobs of a review whose last errors have one
// shape.
type FailureGroup struct {
	// Error is the errors' shape: what errors that differ only in IDs
	// and numbers have in common. A review that finds more distinct
	// errors than it reads counts the rest under "(other)".
	Error string
	Count int64
	// Kinds are the jobs' kinds, in order.
	Kinds []string
	// JobIDs are the first jobs' IDs, at most ten, oldest first.
	JobIDs []int64
}

// SlowJob is a job that took much longer than its kind usually does.
type SlowJob struct {
	Job      JobRecord
	Duration time.Duration
	// Typical is the median duration of the kind's earlier completed jobs,
	// P95 their 95th percentile (see Baseline).
	Typical, P95 time.Duration
}

// Baseline is what a review compares a kind's jobs with: how long its
// earlier completed jobs took, the median and the 95th percentile of
// their run times, over Jobs jobs (at most ReviewQuery.History); or,
// once those jobs are pruned, the median of the last Days days' medians
// and of their 95th percentiles, from the day roll-ups (Jobs is then 0).
// All zero when no earlier job of the kind is known.
type Baseline struct {
	Median, P95 time.Duration
	Jobs, Days  int
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
	MoreBlocking int64
	MissingKinds []string
}

// reviewer is the reviewer of c's jobs for rq.
func (c *ops) reviewer(rq operate.ReviewQuery) operate.Reviewer[JobRecord] {
	timings, now := c.reg.timings(), c.cfg.clock.Now()
	return operate.Reviewer[JobRecord]{Jobs: c.jobs(), Rules: rulesOf(c.reg.rulesFor("")),
		Missed: func(ctx context.Context) ([]operate.Tick, error) {
			return operate.MissedTicks(ctx, c.st, c.db, timings, rq, now)
		},
		Typical: func(ctx context.Context, kind string, before time.Time, days int) (store.Baseline, error) {
			return maintain.Typical(ctx, c.st, c.db, kind, before, days)
		}}
}

// Review reviews the jobs q selects. The database counts the jobs in scope,
// groups their failures and picks the bounded lists; the slow check reads
// the recent history of each kind (or its day roll-ups).
func (c *ops) Review(ctx context.Context, q ReviewQuery) (*Review, error) {
	asked, rq, err := operate.Asked(q).Query(failureSamples)
	if err != nil {
		return nil, err
	}
	q = ReviewQuery(asked)
	r, err := c.reviewer(rq).Review(ctx, rq)
	if err != nil {
		return nil, check.Failed(ctx, "review", err)
	}
	rv := &Review{Query: q, Total: r.Total, Counts: operate.Counts[Status](r.Counts), Failed: r.Failed, MoreFailed: r.MoreFailed,
		Failures: converted(r.Failures, func(g operate.FailureGroup) FailureGroup { return FailureGroup(g) }),
		NeverRan: r.NeverRan, MoreNeverRan: r.MoreNeverRan, MoreSlow: r.MoreSlow, MoreStopped: r.MoreStopped,
		Retrying: r.Retrying, MoreRetrying: r.MoreRetrying, Typical: map[string]Baseline{},
		Slow:        converted(r.Slow, func(s operate.Slow[JobRecord]) SlowJob { return SlowJob(s) }),
		MissedTicks: converted(r.MissedTicks, func(t operate.Tick) Tick { return Tick(t) }),
		Stopped:     converted(r.Stopped, func(s operate.Stopped[JobRecord]) StoppedChain { return StoppedChain(s) })}
	for k, b := range r.Typical {
		rv.Typical[k] = Baseline(b)
	}
	return rv, nil
}
