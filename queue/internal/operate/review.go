package operate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// ReviewQuery is a checked queue.ReviewQuery: a run, a period, or (both
// empty) the jobs created from From to To.
type ReviewQuery struct {
	Scope    store.Filter // RunID or Period
	From, To time.Time
	// SlowFactor and History are the slow check's.
	SlowFactor float64
	History    int
}

// Review is what a review found; its fields mirror queue.Review's.
type Review[R any] struct {
	Total       int64
	Counts      map[string]int64
	Failed      []R
	Slow        []Slow[R]
	NeverRan    []R
	Retrying    []R
	MissedTicks []Tick
	Stopped     []Stopped[R]
	Typical     map[string]time.Duration
}

// Slow is queue.SlowJob.
type Slow[R any] struct {
	Job      R
	Duration time.Duration
	Typical  time.Duration
}

// Stopped is queue.StoppedChain.
type Stopped[R any] struct {
	Rule         string
	ChildKind    string
	Group        string
	Blocking     []R
	MissingKinds []string
}

// Reviewer reviews the jobs of a store against the registry's rules.
type Reviewer[R any] struct {
	Jobs[R]
	Rules []runner.Dependency
	// Missed lists the schedule ticks in the review's scope that created
	// nothing (from the tick ledger).
	Missed func(context.Context) ([]Tick, error)
	// Typical is a kind's typical duration from the day roll-ups, over
	// days days before before, for a kind whose earlier jobs are pruned.
	Typical func(ctx context.Context, kind string, before time.Time, days int) (time.Duration, error)
}

// Review reviews the jobs q selects.
func (rv Reviewer[R]) Review(ctx context.Context, q ReviewQuery) (*Review[R], error) {
	scope := q.Scope
	if q.Scope.RunID == "" && q.Scope.Period == "" {
		scope.CreatedFrom, scope.CreatedBefore = q.From, q.To
	}
	jobs, err := rv.Read(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := &Review[R]{Counts: map[string]int64{}, Total: int64(len(jobs))}
	views := make([]Job, len(jobs))
	for i := range jobs {
		j := rv.View(&jobs[i])
		views[i] = j
		out.Counts[j.Status]++
		switch {
		case j.Status == "FAILED":
			out.Failed = append(out.Failed, jobs[i])
		case j.Status == "QUEUED" && j.Attempts == 0:
			out.NeverRan = append(out.NeverRan, jobs[i])
		case j.Status == "QUEUED":
			out.Retrying = append(out.Retrying, jobs[i])
		}
	}
	if out.Slow, out.Typical, err = rv.slow(ctx, jobs, views, q); err != nil {
		return nil, err
	}
	if out.MissedTicks, err = rv.Missed(ctx); err != nil {
		return nil, err
	}
	if out.Stopped, err = rv.stopped(ctx, jobs, views); err != nil {
		return nil, err
	}
	return out, nil
}

// slow compares each completed job with the median of the previous
// History completed jobs of its kind: not in scope, and completed before
// the first of the kind's jobs in scope started, so that reviewing an old
// night compares it with the nights before it, not after. It returns the
// slow jobs and the median of each kind it compared with.
func (rv Reviewer[R]) slow(ctx context.Context, jobs []R, views []Job, q ReviewQuery) ([]Slow[R], map[string]time.Duration, error) {
	typical := map[string]time.Duration{}
	inScope := make([]int64, 0, len(views))
	firstStart := map[string]time.Time{}
	for _, j := range views {
		inScope = append(inScope, j.ID)
		if s := j.StartedAt; s != nil && (firstStart[j.Kind].IsZero() || s.Before(firstStart[j.Kind])) {
			firstStart[j.Kind] = *s
		}
	}
	var out []Slow[R]
	for i, j := range views {
		if j.Status != "COMPLETED" || j.StartedAt == nil || j.CompletedAt == nil {
			continue
		}
		d := j.CompletedAt.Sub(*j.StartedAt)
		if d <= 0 {
			continue
		}
		t, ok := typical[j.Kind]
		if !ok {
			var err error
			var found bool
			t, found, err = rv.Store.TypicalDuration(ctx, rv.DB, j.Kind, inScope, firstStart[j.Kind], q.History)
			if err == nil && !found { // pruned: the day roll-ups remember
				t, err = rv.Typical(ctx, j.Kind, firstStart[j.Kind], q.History)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("history of %q: %w", j.Kind, err)
			}
			typical[j.Kind] = t
		}
		if t > 0 && float64(d) >= q.SlowFactor*float64(t) {
			out = append(out, Slow[R]{Job: jobs[i], Duration: d, Typical: t})
		}
	}
	return out, typical, nil
}

// stopped finds, for every rule, the groups in scope whose child is
// missing because a parent did not complete.
func (rv Reviewer[R]) stopped(ctx context.Context, jobs []R, views []Job) ([]Stopped[R], error) {
	var out []Stopped[R]
	for _, ru := range rv.Rules {
		// A group of parents: one (one-to-one), or a period's, read whole
		// below because parents may be outside scope (many-to-one).
		type group struct {
			period  string
			parents []R
		}
		groups := map[string]*group{}
		for i, j := range views {
			switch {
			case !slices.Contains(ru.Parents, j.Kind):
			case ru.Each:
				groups[runner.EachGroup(j.ID)] = &group{parents: []R{jobs[i]}}
			case j.Period != nil:
				groups[runner.PeriodGroup(*j.Period)] = &group{period: *j.Period}
			}
		}
		for g, gr := range groups {
			child, err := rv.Store.Count(ctx, rv.DB, store.Filter{IdempotencyKeys: []string{runner.ChildKey(ru.Name, g)}})
			if err != nil {
				return nil, err
			}
			if child > 0 {
				continue
			}
			sc := Stopped[R]{Rule: ru.Name, ChildKind: ru.ChildKind, Group: g}
			if !ru.Each {
				sc.Group = gr.period
				if gr.parents, err = rv.Read(ctx, store.Filter{Period: gr.period, Kinds: ru.Parents}); err != nil {
					return nil, err
				}
			}
			present := map[string]bool{}
			for i := range gr.parents {
				p := rv.View(&gr.parents[i])
				present[p.Kind] = true
				if p.Status != "COMPLETED" {
					sc.Blocking = append(sc.Blocking, gr.parents[i])
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
	slices.SortFunc(out, func(a, b Stopped[R]) int {
		if c := strings.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return out, nil
}

// MissedTicks lists the ticks in the review's scope that created nothing,
// oldest first: those the tick ledger records as missed or as having
// created no job, and those of scheds' timetables, due by now, that the
// ledger does not know (no runner ran, or they fired before the ledger
// existed) and that have no job.
func MissedTicks(ctx context.Context, st store.Store, db *gorm.DB, scheds map[string]*runner.Timing, q ReviewQuery, now time.Time) ([]Tick, error) {
	var sq store.TicksQuery
	inScope := func(Tick) bool { return true }
	switch {
	case q.Scope.RunID != "":
		name, stamp, _ := strings.Cut(q.Scope.RunID, "@")
		at, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return nil, nil // not a tick's run
		}
		sq = store.TicksQuery{Schedules: []string{name}, From: at, To: at.Add(time.Second)}
		inScope = func(t Tick) bool { return t.RunID == q.Scope.RunID }
	case q.Scope.Period != "":
		day, err := time.Parse("2006-01-02", q.Scope.Period)
		if err != nil {
			return nil, nil // a period set by hand
		}
		// Local dates span at most these UTC times, in any zone.
		sq = store.TicksQuery{From: day.Add(-14 * time.Hour), To: day.Add(38 * time.Hour)}
		inScope = func(t Tick) bool { return t.Period == q.Scope.Period }
	default:
		sq = store.TicksQuery{From: q.From, To: q.To}
	}
	recorded, err := store.Ticks(ctx, st, db, sq)
	if err != nil {
		return nil, err
	}
	type key struct {
		name string
		at   int64
	}
	known := map[key]bool{}
	var missed []Tick
	for _, r := range recorded {
		t := LedgerTick(scheds[r.Schedule], r)
		if !inScope(t) {
			continue
		}
		known[key{r.Schedule, r.At.UnixNano()}] = true
		if r.Outcome == store.TickMissed || r.Jobs == 0 {
			missed = append(missed, t)
		}
	}
	for _, s := range scheds {
		var ats []time.Time
		switch {
		case q.Scope.Period != "":
			ats = s.OnDay(q.Scope.Period)
		case q.Scope.RunID != "":
			if at, ok := s.Of(q.Scope.RunID); ok {
				ats = []time.Time{at}
			}
		default:
			ats = s.Between(q.From, q.To)
		}
		due := DueBefore(s, now)
		for _, at := range ats {
			if known[key{s.Name, at.UnixNano()}] || !at.Before(due) {
				continue
			}
			t := TickOf(s.Name, s.Tick(at))
			n, err := st.Count(ctx, db, store.Filter{RunID: t.RunID})
			if err != nil {
				return nil, err
			}
			if n == 0 {
				missed = append(missed, t)
			}
		}
	}
	slices.SortFunc(missed, func(a, b Tick) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Schedule, b.Schedule)
	})
	return missed, nil
}

// LedgerTick is the tick of ledger row r of schedule s (nil if it is not
// registered), in s's location (UTC without s).
func LedgerTick(s *runner.Timing, r store.TickRow) Tick {
	at := r.At.UTC()
	if s != nil {
		at = at.In(s.Location)
	}
	return Tick{Schedule: r.Schedule, At: at, RunID: r.RunID, Period: at.Format("2006-01-02")}
}
