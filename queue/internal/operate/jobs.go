package operate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Filter is queue.Filter field for field, so that queue converts one into
// the other; S is queue.Status.
type Filter[S ~string] struct {
	Kinds                       []string
	Statuses                    []S
	Queue, CorrelationID, RunID string
	Period                      string
	CreatedAfter, CreatedBefore time.Time
	Search                      string
	AfterID, BeforeID           int64
	Newest                      bool
	Limit                       int
}

// Selection is a Filter checked and converted for the store.
type Selection struct {
	filter store.Filter
	limit  int
	err    error // why the filter cannot be used
}

// Select checks f, refusing strings PostgreSQL could not compare with a
// column, and converts it for the store.
func (f Filter[S]) Select() Selection {
	nv := []string{"Filter.Queue", f.Queue, "Filter.CorrelationID", f.CorrelationID,
		"Filter.RunID", f.RunID, "Filter.Period", f.Period, "Filter.Search", f.Search}
	for i, k := range f.Kinds {
		nv = append(nv, fmt.Sprintf("Filter.Kinds[%d]", i), k)
	}
	sf := store.Filter{Kinds: f.Kinds, Queue: f.Queue, CorrelationID: f.CorrelationID, RunID: f.RunID, Period: f.Period,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, AfterID: f.AfterID, BeforeID: f.BeforeID,
		Search: f.Search, Newest: f.Newest}
	for i, s := range f.Statuses {
		nv = append(nv, fmt.Sprintf("Filter.Statuses[%d]", i), string(s))
		sf.Statuses = append(sf.Statuses, string(s))
	}
	return Selection{filter: sf, limit: f.Limit, err: check.Texts(nv...)}
}

// unpaged returns the selection without the fields that page through
// results, for the operations that act on every job it selects.
func (s Selection) unpaged() (store.Filter, error) {
	f := s.filter
	f.AfterID, f.BeforeID, f.Newest = 0, 0, false
	return f, s.err
}

// List returns the jobs s selects, by ascending ID or newest first, at
// most its limit (0 means 100, the most is 10,000).
func (j Jobs[R]) List(ctx context.Context, s Selection) ([]R, error) {
	if s.err != nil {
		return nil, s.err
	}
	limit, err := check.PageLimit(s.limit, 10_000)
	if err != nil {
		return nil, err
	}
	var out []R
	if err := j.Store.Jobs(ctx, j.DB, s.filter, limit, &out); err != nil {
		return nil, check.Failed(ctx, "list", err)
	}
	return out, nil
}

// Count counts the jobs s selects, its paging aside.
func (j Jobs[R]) Count(ctx context.Context, s Selection) (int64, error) {
	f, err := s.unpaged()
	if err != nil {
		return 0, err
	}
	n, err := j.Store.Count(ctx, j.DB, f)
	return n, check.Failed(ctx, "count", err)
}

// RetryFailed requeues the FAILED jobs s selects, its paging aside, in one
// statement, each keeping under maxAttempts attempts in all.
func (j Jobs[R]) RetryFailed(ctx context.Context, s Selection, maxAttempts int) (n int64, err error) {
	f, err := s.unpaged()
	if err != nil {
		return 0, err
	}
	err = j.Store.Tx(ctx, j.DB, func(tx *gorm.DB) (err error) {
		n, err = j.Store.RetryFailed(tx, f, maxAttempts)
		return err
	})
	if err != nil {
		return 0, check.Failed(ctx, "retry failed", err)
	}
	return n, nil
}

// CancelSelected cancels the QUEUED and PROCESSING jobs s selects, its
// paging aside (see CancelMatching).
func (j Jobs[R]) CancelSelected(ctx context.Context, s Selection) (int64, error) {
	f, err := s.unpaged()
	if err != nil {
		return 0, err
	}
	n, err := j.CancelMatching(ctx, f)
	return n, check.Failed(ctx, "cancel matching", err)
}

// Get returns the job with the given ID, or an error wrapping
// j.Errs.NotFound.
func (j Jobs[R]) Get(ctx context.Context, id int64) (*R, error) {
	rec, err := j.get(ctx, j.DB, id)
	if err != nil && !errors.Is(err, j.Errs.NotFound) {
		return nil, check.Failed(ctx, fmt.Sprint("get ", id), err)
	}
	return rec, err
}

// get reads the job with the given ID on db.
func (j Jobs[R]) get(ctx context.Context, db *gorm.DB, id int64) (*R, error) {
	var recs []R
	if err := j.Store.Jobs(ctx, db, store.Filter{IDs: []int64{id}}, 1, &recs); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %d", j.Errs.NotFound, id)
	}
	return &recs[0], nil
}

// Change locks job id, checks its status is one of from, applies update
// and returns the job as it is afterwards (see Transition).
func (j Jobs[R]) Change(ctx context.Context, id int64, op string, from []string, maxAttempts int, update func(tx *gorm.DB) error) (*R, error) {
	var rec *R
	err := Transition(ctx, j.Store, j.DB, j.Errs, id, op, from, maxAttempts, update, func(tx *gorm.DB) (err error) {
		rec, err = j.get(ctx, tx, id)
		return err
	})
	if err != nil && !j.Errs.Expected(err) {
		return nil, check.Failed(ctx, fmt.Sprintf("%s %d", op, id), err)
	}
	return rec, err
}

// Stats is queue.Stats field for field; S is queue.Status.
type Stats[S ~string] struct {
	ByStatus    map[S]int64
	ByKind      map[string]map[S]int64
	Ready       int64
	OldestReady time.Duration
}

// ReadStats counts the jobs by status and kind (see store.CountByKind),
// and the ready ones.
func ReadStats[S ~string](ctx context.Context, st store.Store, db *gorm.DB) (Stats[S], error) {
	s := Stats[S]{ByStatus: map[S]int64{}, ByKind: map[string]map[S]int64{}}
	counts, err := store.CountByKind(ctx, st, db)
	for _, kc := range counts {
		s.ByStatus[S(kc.Status)] += kc.N
		if s.ByKind[kc.Kind] == nil {
			s.ByKind[kc.Kind] = map[S]int64{}
		}
		s.ByKind[kc.Kind][S(kc.Status)] += kc.N
	}
	if err == nil {
		s.Ready, s.OldestReady, err = st.Ready(ctx, db)
	}
	return s, check.Failed(ctx, "stats", err)
}

// Attempt is queue.Attempt field for field.
type Attempt struct {
	Number     int
	Runner     string
	StartedAt  time.Time
	FinishedAt *time.Time
	Outcome    string
	Error      string
}

// AttemptsOf returns the kept attempts of job id, oldest first, or an
// error wrapping j.Errs.NotFound.
func (j Jobs[R]) AttemptsOf(ctx context.Context, id int64) ([]Attempt, error) {
	rec, err := j.Get(ctx, id) // first, so that an attempt that ends meanwhile is found in the history
	if err != nil {
		return nil, err
	}
	as, err := j.Attempts(ctx, j.View(rec))
	if err != nil {
		return nil, check.Failed(ctx, fmt.Sprint("attempts of ", id), err)
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = Attempt{Number: a.Claim, Runner: a.Runner, Outcome: a.Outcome, Error: a.Error}
		if a.StartedAt != nil {
			out[i].StartedAt = *a.StartedAt
		}
		if !a.FinishedAt.IsZero() {
			out[i].FinishedAt = &as[i].FinishedAt
		}
	}
	return out, nil
}

// ChildrenOf returns the jobs that rules, those in which a kind is a
// parent, released when job id completed (see Children), or an error
// wrapping j.Errs.NotFound.
func (j Jobs[R]) ChildrenOf(ctx context.Context, id int64, rules func(kind string) []runner.Dependency) ([]R, error) {
	rec, err := j.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	job := j.View(rec)
	out, err := j.Children(ctx, job, rules(job.Kind))
	return out, check.Failed(ctx, fmt.Sprint("children of ", id), err)
}
