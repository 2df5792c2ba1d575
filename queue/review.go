package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
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
	// MissedTicks lists schedule ticks in the range that created no job.
	MissedTicks []Tick
	// Stopped lists dependency rules whose child was not released because a
	// parent did not complete.
	Stopped []StoppedChain
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
	scope := store.Filter{RunID: q.RunID, Period: q.Period}
	if q.RunID == "" && q.Period == "" {
		scope.CreatedFrom, scope.CreatedBefore = q.From, q.To
	}
	var jobs []JobRecord
	if err := c.st.Jobs(ctx, c.db, scope, 0, &jobs); err != nil {
		return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
	}
	rv := &Review{Query: q, Counts: map[Status]int64{}, Total: int64(len(jobs))}
	ids := map[int64]bool{}
	for _, j := range jobs {
		ids[j.ID] = true
		rv.Counts[j.Status]++
		switch {
		case j.Status == StatusFailed:
			rv.Failed = append(rv.Failed, j)
		case j.Status == StatusQueued && j.Attempts == 0:
			rv.NeverRan = append(rv.NeverRan, j)
		}
	}
	var err error
	if rv.Slow, err = c.slowJobs(ctx, jobs, q); err != nil {
		return nil, err
	}
	rv.MissedTicks, err = c.missedTicks(ctx, q)
	if err != nil {
		return nil, err
	}
	rv.Stopped, err = c.stoppedChains(ctx, jobs)
	if err != nil {
		return nil, err
	}
	return rv, nil
}

// slowJobs compares each completed job with the median of the previous
// History completed jobs of its kind: not in scope, and completed before
// the first of the kind's jobs in scope started, so that reviewing an old
// night compares it with the nights before it, not after.
func (c *ops) slowJobs(ctx context.Context, jobs []JobRecord, q ReviewQuery) ([]SlowJob, error) {
	typical := map[string]time.Duration{}
	inScope := make([]int64, 0, len(jobs))
	firstStart := map[string]time.Time{}
	for _, j := range jobs {
		inScope = append(inScope, j.ID)
		if s := j.StartedAt; s != nil && (firstStart[j.Kind].IsZero() || s.Before(firstStart[j.Kind])) {
			firstStart[j.Kind] = *s
		}
	}
	var out []SlowJob
	for _, j := range jobs {
		d := j.Duration()
		if j.Status != StatusCompleted || d <= 0 {
			continue
		}
		t, ok := typical[j.Kind]
		if !ok {
			var err error
			var found bool
			t, found, err = c.st.TypicalDuration(ctx, c.db, j.Kind, inScope, firstStart[j.Kind], q.History)
			if err == nil && !found { // pruned: the day roll-ups remember
				t, err = c.typicalFromHistory(ctx, j.Kind, firstStart[j.Kind], q.History)
			}
			if err != nil {
				return nil, fmt.Errorf("queue: review: history of %q: %w", j.Kind, notMigrated(err))
			}
			typical[j.Kind] = t
		}
		if t > 0 && float64(d) >= q.SlowFactor*float64(t) {
			out = append(out, SlowJob{Job: j, Duration: d, Typical: t})
		}
	}
	return out, nil
}

// missedTicks lists ticks of the registered schedules that created nothing:
// for a run, its own tick; for a range, every tick in it.
func (c *ops) missedTicks(ctx context.Context, q ReviewQuery) ([]Tick, error) {
	scheds, _ := c.reg.schedulesNow()
	var expected []Tick
	for _, s := range scheds {
		var ats []time.Time
		switch {
		case q.Period != "":
			ats = s.timing.OnDay(q.Period)
		case q.RunID != "":
			if at, ok := s.timing.Of(q.RunID); ok {
				ats = []time.Time{at}
			}
		default:
			ats = s.timing.Between(q.From, q.To)
		}
		for _, at := range ats {
			expected = append(expected, s.tick(at))
		}
	}
	var missed []Tick
	for _, t := range expected {
		n, err := c.st.Count(ctx, c.db, store.Filter{RunID: t.RunID})
		if err != nil {
			return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
		}
		if n == 0 {
			missed = append(missed, t)
		}
	}
	slices.SortFunc(missed, func(a, b Tick) int { return a.At.Compare(b.At) })
	return missed, nil
}

// stoppedChains finds, for every rule, the groups in scope whose child is
// missing because a parent did not complete.
func (c *ops) stoppedChains(ctx context.Context, jobs []JobRecord) ([]StoppedChain, error) {
	c.reg.mu.RLock()
	rules := slices.Clone(c.reg.rules)
	c.reg.mu.RUnlock()
	var out []StoppedChain
	for _, ru := range rules {
		// A group of parents: one (one-to-one), or a period's, read whole
		// below because parents may be outside scope (many-to-one).
		type group struct {
			period  string
			parents []JobRecord
		}
		groups := map[string]*group{}
		for _, j := range jobs {
			switch {
			case !slices.Contains(ru.Parents, j.Kind):
			case ru.Each:
				groups[runner.EachGroup(j.ID)] = &group{parents: []JobRecord{j}}
			case j.Period != nil:
				groups[runner.PeriodGroup(*j.Period)] = &group{period: *j.Period}
			}
		}
		for g, gr := range groups {
			child, err := c.st.Count(ctx, c.db, store.Filter{IdempotencyKeys: []string{runner.ChildKey(ru.Name, g)}})
			if err != nil {
				return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
			}
			if child > 0 {
				continue
			}
			sc := StoppedChain{Rule: ru.Name, ChildKind: ru.childKind, Group: g}
			if !ru.Each {
				sc.Group = gr.period
				if err := c.st.Jobs(ctx, c.db, store.Filter{Period: gr.period, Kinds: ru.Parents}, 0, &gr.parents); err != nil {
					return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
				}
			}
			present := map[string]bool{}
			for _, p := range gr.parents {
				present[p.Kind] = true
				if p.Status != StatusCompleted {
					sc.Blocking = append(sc.Blocking, p)
				}
			}
			for _, k := range ru.Parents {
				if !present[k] {
					sc.MissingKinds = append(sc.MissingKinds, k)
				}
			}
			out = append(out, sc)
		}
	}
	slices.SortFunc(out, func(a, b StoppedChain) int {
		if c := strings.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return out, nil
}
