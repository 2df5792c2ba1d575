package operate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/errshape"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
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
	// Limit bounds each list of jobs; Samples the job IDs of a failure
	// group.
	Limit, Samples int
}

// Asked is queue.ReviewQuery field for field.
type Asked struct {
	RunID      string
	Period     string
	From, To   time.Time
	SlowFactor float64
	History    int
	Limit      int
}

// Review's bounds.
const (
	defaultReviewLimit = 100
	maxReviewLimit     = 10_000
)

// Query checks a and returns it with its defaults set, and the query it
// asks for, whose failure groups name samples jobs each.
func (a Asked) Query(samples int) (Asked, ReviewQuery, error) {
	rangeOK := !a.From.IsZero() && !a.To.IsZero() && a.From.Before(a.To)
	switch {
	case a.RunID != "" && a.Period != "":
		return a, ReviewQuery{}, check.Invalid("review takes a RunID or a Period, not both")
	case a.RunID == "" && a.Period == "" && !rangeOK:
		return a, ReviewQuery{}, check.Invalid("review needs a RunID, a Period, or a From before a To")
	}
	if err := check.Texts("ReviewQuery.RunID", a.RunID, "ReviewQuery.Period", a.Period); err != nil {
		return a, ReviewQuery{}, err
	}
	a.SlowFactor, a.History, a.Limit = cmp.Or(a.SlowFactor, 1.5), cmp.Or(a.History, 20), cmp.Or(a.Limit, defaultReviewLimit)
	if a.SlowFactor < 1 || a.History < 1 || a.Limit < 1 || a.Limit > maxReviewLimit {
		return a, ReviewQuery{}, check.Invalid("review: SlowFactor must be at least 1, History positive and Limit from 1 to 10,000")
	}
	return a, ReviewQuery{Scope: store.Filter{RunID: a.RunID, Period: a.Period}, From: a.From, To: a.To,
		SlowFactor: a.SlowFactor, History: a.History, Limit: a.Limit, Samples: samples}, nil
}

// Review is what a review found; its fields mirror queue.Review's.
type Review[R any] struct {
	Total        int64
	Counts       map[string]int64
	Failed       []R
	MoreFailed   int64
	Failures     []FailureGroup
	Slow         []Slow[R]
	MoreSlow     int64
	NeverRan     []R
	MoreNeverRan int64
	Retrying     []R
	MoreRetrying int64
	MissedTicks  []Tick
	Stopped      []Stopped[R]
	MoreStopped  int64
	Typical      map[string]store.Baseline
}

// FailureGroup is queue.FailureGroup.
type FailureGroup struct {
	Error  string
	Count  int64
	Kinds  []string
	JobIDs []int64
}

// Slow is queue.SlowJob.
type Slow[R any] struct {
	Job      R
	Duration time.Duration
	Typical  time.Duration
	P95      time.Duration
}

// Stopped is queue.StoppedChain.
type Stopped[R any] struct {
	Rule         string
	ChildKind    string
	Group        string
	Blocking     []R
	MoreBlocking int64
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
	Typical func(ctx context.Context, kind string, before time.Time, days int) (store.Baseline, error)
}

// errorRows bounds the rows of (error, kind) samples a review reads for
// its failure groups; the failures past them are counted as OtherErrors.
const errorRows = 2000

// notCompleted are the statuses of a parent that blocks its child.
var notCompleted = []string{"QUEUED", "PROCESSING", "FAILED", "CANCELLED"}

// Review reviews the jobs q selects. The database counts, groups and picks:
// the statements read the scope's rows but return only the counts and the
// first q.Limit jobs of each list, so a night of a hundred thousand jobs
// costs a few scans of its rows, not their transfer.
func (rv Reviewer[R]) Review(ctx context.Context, q ReviewQuery) (*Review[R], error) {
	scope := q.Scope
	if q.Scope.RunID == "" && q.Scope.Period == "" {
		scope.CreatedFrom, scope.CreatedBefore = q.From, q.To
	}
	summary, kept, err := store.CountKindStatus(ctx, rv.Store, rv.DB, scope)
	if err != nil {
		return nil, err
	}
	out := &Review[R]{Counts: map[string]int64{}}
	for _, r := range summary {
		out.Total += r.N
		out.Counts[r.Status] += r.N
	}
	completed, firstStart := startsOf(summary)
	if n := out.Counts["FAILED"]; n > 0 {
		f := scope
		f.Statuses = []string{"FAILED"}
		if out.Failed, out.MoreFailed, err = rv.page(ctx, f, q.Limit, n); err != nil {
			return nil, err
		}
		if out.Failures, err = rv.failures(ctx, scope, n, q.Samples); err != nil {
			return nil, err
		}
	}
	if out.Counts["QUEUED"] > 0 {
		f := scope
		f.Statuses, f.Unstarted = []string{"QUEUED"}, true
		if out.NeverRan, out.MoreNeverRan, err = rv.page(ctx, f, q.Limit, -1); err != nil {
			return nil, err
		}
		f.Unstarted, f.Retried = false, true
		if out.Retrying, out.MoreRetrying, err = rv.page(ctx, f, q.Limit, -1); err != nil {
			return nil, err
		}
	}
	if out.Slow, out.MoreSlow, out.Typical, err = rv.slow(ctx, scope, kept, completed, firstStart, q); err != nil {
		return nil, err
	}
	if out.MissedTicks, err = rv.Missed(ctx); err != nil {
		return nil, err
	}
	if out.Stopped, out.MoreStopped, err = rv.stopped(ctx, scope, q.Limit); err != nil {
		return nil, err
	}
	return out, nil
}

// page reads the first limit jobs f selects, and how many more it selects:
// total minus those read, counted if total is negative and the page is
// full.
func (rv Reviewer[R]) page(ctx context.Context, f store.Filter, limit int, total int64) ([]R, int64, error) {
	var jobs []R
	if err := rv.Store.Jobs(ctx, rv.DB, f, limit, &jobs); err != nil {
		return nil, 0, err
	}
	if len(jobs) < limit {
		return jobs, 0, nil
	}
	if total < 0 {
		var err error
		if total, err = rv.Store.Count(ctx, rv.DB, f); err != nil {
			return nil, 0, err
		}
	}
	return jobs, max(total-int64(len(jobs)), 0), nil
}

// failures groups the failed jobs f selects, failed of them, by the shape
// of their last error, the largest group first: the database groups them
// by error and kind, and the groups whose errors differ only in IDs and
// numbers are merged here.
func (rv Reviewer[R]) failures(ctx context.Context, f store.Filter, failed int64, samples int) ([]FailureGroup, error) {
	rows, err := store.ErrorSamples(ctx, rv.Store, rv.DB, f, samples, errorRows)
	if err != nil {
		return nil, err
	}
	groups := map[string]*FailureGroup{}
	var counted int64
	add := func(shape string, n int64, kind string, ids []int64) {
		g := groups[shape]
		if g == nil {
			g = &FailureGroup{Error: shape}
			groups[shape] = g
		}
		g.Count += n
		if kind != "" && !slices.Contains(g.Kinds, kind) {
			g.Kinds = append(g.Kinds, kind)
		}
		g.JobIDs = append(g.JobIDs, ids...)
	}
	for _, r := range rows {
		add(errshape.Of(r.Error), r.N, r.Kind, r.IDs)
		counted += r.N
	}
	if rest := failed - counted; rest > 0 {
		add(maintain.OtherErrors, rest, "", nil)
	}
	out := make([]FailureGroup, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g.Kinds)
		slices.Sort(g.JobIDs)
		g.JobIDs = g.JobIDs[:min(len(g.JobIDs), samples)]
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b FailureGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Error, b.Error))
	})
	return out, nil
}

// startsOf returns the kinds with completed jobs in summary, and each
// kind's first start.
func startsOf(summary []store.KindStatus) (completed []string, firstStart map[string]time.Time) {
	firstStart = map[string]time.Time{}
	for _, r := range summary {
		if f := firstStart[r.Kind]; !r.FirstStart.IsZero() && (f.IsZero() || r.FirstStart.Before(f)) {
			firstStart[r.Kind] = r.FirstStart
		}
		if r.Status == "COMPLETED" {
			completed = append(completed, r.Kind)
		}
	}
	return completed, firstStart
}

// KeepSlow finds the slow jobs of q's run, as Review with q would, and
// keeps them with what the runs roll-up kept of it (store.KeepSlow), if
// the run has finished: what the maintenance does as it keeps a run's
// counts, without the rest of a review.
func (rv Reviewer[R]) KeepSlow(ctx context.Context, q ReviewQuery) error {
	summary, kept, err := store.CountKindStatus(ctx, rv.Store, rv.DB, q.Scope)
	if err != nil || kept == nil {
		return err
	}
	completed, firstStart := startsOf(summary)
	_, threshold, err := rv.thresholds(ctx, completed, firstStart, q)
	if err != nil || len(threshold) == 0 {
		return err
	}
	_, _, err = rv.slowPage(ctx, q.Scope, kept, threshold, q.Limit)
	return err
}

// thresholds returns, for each kind with completed jobs in scope, its
// typical duration: the median of the kind's previous History completed
// jobs that finished before the first of the kind's jobs in scope started
// (so that reviewing an old night compares it with the nights before it,
// not after), or, once those are pruned, of its day roll-ups; and, for
// those with a known median, the run time at least which a job is slow
// (SlowFactor times it).
func (rv Reviewer[R]) thresholds(ctx context.Context, kinds []string, firstStart map[string]time.Time, q ReviewQuery) (map[string]store.Baseline, map[string]time.Duration, error) {
	typical := map[string]store.Baseline{}
	threshold := map[string]time.Duration{}
	for _, k := range kinds {
		before := firstStart[k]
		if before.IsZero() {
			continue // none started: none has a run time
		}
		t, found, err := rv.Store.TypicalDuration(ctx, rv.DB, k, before, q.History)
		if err == nil && !found { // pruned: the day roll-ups remember
			t, err = rv.Typical(ctx, k, before, q.History)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("history of %q: %w", k, err)
		}
		typical[k] = t // zero: no earlier job of the kind is known
		if t.Median > 0 {
			threshold[k] = time.Duration(q.SlowFactor * float64(t.Median))
		}
	}
	return typical, threshold, nil
}

// slow lists the completed jobs in scope that took SlowFactor times their
// kind's typical duration (see thresholds); the database picks them.
// kept is what was kept of a finished run in scope, if any.
func (rv Reviewer[R]) slow(ctx context.Context, scope store.Filter, kept *store.KeptRun, kinds []string, firstStart map[string]time.Time, q ReviewQuery) ([]Slow[R], int64, map[string]store.Baseline, error) {
	typical, threshold, err := rv.thresholds(ctx, kinds, firstStart, q)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(threshold) == 0 {
		return nil, 0, typical, nil
	}
	ids, total, err := rv.slowPage(ctx, scope, kept, threshold, q.Limit)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(ids) == 0 {
		return []Slow[R]{}, 0, typical, nil
	}
	var jobs []R
	if err := rv.Store.Jobs(ctx, rv.DB, store.Filter{IDs: ids}, len(ids), &jobs); err != nil {
		return nil, 0, nil, err
	}
	more := total - int64(len(ids))
	out := make([]Slow[R], len(jobs))
	for i := range jobs {
		j := rv.View(&jobs[i])
		b := typical[j.Kind]
		out[i] = Slow[R]{Job: jobs[i], Duration: j.CompletedAt.Sub(*j.StartedAt), Typical: b.Median, P95: b.P95}
	}
	return out, more, typical, nil
}

// slowPage returns the IDs of the first limit completed jobs in scope
// that ran at least their kind's threshold, and how many there are. A
// finished run's (kept is what the runs roll-up kept of it) are found once
// (the maintenance looks for them as it keeps its counts) and kept with
// its counts (store.KeepSlow): later reviews of the night read them there
// rather than each of its jobs, which at a hundred thousand jobs was most
// of the review's time.
func (rv Reviewer[R]) slowPage(ctx context.Context, scope store.Filter, kept *store.KeptRun, threshold map[string]time.Duration, limit int) ([]int64, int64, error) {
	if kept != nil && kept.Slow.Answers(threshold, limit) {
		return kept.Slow.IDs[:min(limit, len(kept.Slow.IDs))], kept.Slow.Total, nil
	}
	f := scope
	f.RunAtLeast = threshold
	ids, total, err := store.CountedPage(ctx, rv.Store, rv.DB, f, limit)
	if err != nil || kept == nil {
		return ids, total, err
	}
	// Keeping the page spares the next review; failing to (a reader
	// without write access, say) costs it only this read again, so the
	// review goes on with what it found.
	_ = store.KeepSlow(ctx, rv.Store, rv.DB, scope.RunID, store.NewRunSlow(kept.Basis, threshold, limit, ids, total))
	return ids, total, nil
}

// stopped finds, for every rule, the groups in scope whose child is
// missing because a parent did not complete: at most limit of a rule, and
// how many more there are of the one-to-one rules (a many-to-one rule has
// a group a period, and a scope few periods).
func (rv Reviewer[R]) stopped(ctx context.Context, scope store.Filter, limit int) ([]Stopped[R], int64, error) {
	var out []Stopped[R]
	var more int64
	for _, ru := range rv.Rules {
		f := scope
		f.Kinds = ru.Parents
		if ru.Each {
			f.Childless = runner.EachKeyPrefix(ru.Name)
			parents, n, err := rv.page(ctx, f, limit, -1)
			if err != nil {
				return nil, 0, err
			}
			more += n
			for i := range parents {
				p := rv.View(&parents[i])
				sc := Stopped[R]{Rule: ru.Name, ChildKind: ru.ChildKind, Group: runner.EachGroup(p.ID)}
				if p.Status != "COMPLETED" {
					sc.Blocking = parents[i : i+1]
				}
				out = append(out, sc)
			}
			continue
		}
		periods, err := store.Periods(ctx, rv.Store, rv.DB, f, limit)
		if err != nil {
			return nil, 0, err
		}
		for _, period := range periods {
			sc, err := rv.stoppedPeriod(ctx, ru, period, limit)
			if err != nil {
				return nil, 0, err
			}
			if sc != nil {
				out = append(out, *sc)
			}
		}
	}
	slices.SortFunc(out, func(a, b Stopped[R]) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Group, b.Group))
	})
	return out, more, nil
}

// stoppedPeriod is many-to-one rule ru's stopped chain of period, nil if
// its child was released. Its parents are read whole, within the limit:
// they may be outside the review's scope.
func (rv Reviewer[R]) stoppedPeriod(ctx context.Context, ru runner.Dependency, period string, limit int) (*Stopped[R], error) {
	child, err := rv.Store.Count(ctx, rv.DB, store.Filter{IdempotencyKeys: []string{runner.ChildKey(ru.Name, runner.PeriodGroup(period))}})
	if err != nil || child > 0 {
		return nil, err
	}
	sc := Stopped[R]{Rule: ru.Name, ChildKind: ru.ChildKind, Group: period}
	parents := store.Filter{Period: period, Kinds: ru.Parents}
	present, err := store.Kinds(ctx, rv.Store, rv.DB, parents)
	if err != nil {
		return nil, err
	}
	for _, k := range ru.Parents {
		if !slices.Contains(present, k) {
			sc.MissingKinds = append(sc.MissingKinds, k)
		}
	}
	parents.Statuses = notCompleted
	if sc.Blocking, sc.MoreBlocking, err = rv.page(ctx, parents, limit, -1); err != nil {
		return nil, err
	}
	return &sc, nil
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
		name, at, ok := runner.TickOfRun(q.Scope.RunID)
		if !ok {
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

// Counts returns counts by status name as counts by S, queue.Status.
func Counts[S ~string](in map[string]int64) map[S]int64 {
	out := make(map[S]int64, len(in))
	for s, n := range in {
		out[S(s)] = n
	}
	return out
}
