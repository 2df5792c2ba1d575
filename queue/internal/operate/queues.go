package operate

import (
	"context"
	"errors"
	"fmt"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// QueueInfo is queue.QueueInfo field for field; S is queue.Status.
type QueueInfo[S ~string] struct {
	Name      string
	Counts    map[S]int64
	OldestDue time.Duration
	Paused    bool
	PausedAt  *time.Time
}

// Queues describes every queue that has jobs or is paused, by name.
func Queues[S ~string](ctx context.Context, st store.Store, db *gorm.DB) ([]QueueInfo[S], error) {
	counts, err := store.CountByQueue(ctx, st, db)
	if err != nil {
		return nil, check.Failed(ctx, "queues", err)
	}
	paused, err := st.Paused(ctx, db)
	if err != nil {
		return nil, check.Failed(ctx, "queues", err)
	}
	byName := map[string]*QueueInfo[S]{}
	info := func(name string) *QueueInfo[S] {
		if byName[name] == nil {
			byName[name] = &QueueInfo[S]{Name: name, Counts: map[S]int64{}}
		}
		return byName[name]
	}
	for _, qc := range counts {
		q := info(qc.Queue)
		q.Counts[S(qc.Status)] += qc.N // a finished status may come in two parts
		q.OldestDue = max(q.OldestDue, qc.Oldest)
	}
	for _, p := range paused {
		q := info(p.Name)
		at := p.PausedAt
		q.Paused, q.PausedAt = true, &at
	}
	out := make([]QueueInfo[S], 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueInfo[S]) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Attempts returns the kept attempts of job, oldest first: those of its
// history, and the one its row holds if it completed (FinishedAt set) or
// runs (FinishedAt zero). Read job first, so that an attempt that ends
// meanwhile is found in the history.
func (j Jobs[R]) Attempts(ctx context.Context, job Job) ([]store.Attempt, error) {
	out, err := j.Store.History(ctx, j.DB, job.ID)
	if err != nil {
		return nil, err
	}
	if job.Status == "COMPLETED" || job.Status == "PROCESSING" {
		last := store.Attempt{Claim: job.Claims, StartedAt: job.StartedAt, Outcome: "running"}
		if job.LockedBy != nil {
			last.Runner = *job.LockedBy
		}
		if job.Status == "COMPLETED" {
			last.Outcome = "completed"
			if job.CompletedAt != nil {
				last.FinishedAt = *job.CompletedAt
			}
		}
		if len(out) == 0 || out[len(out)-1].Claim < last.Claim {
			out = append(out, last)
		}
	}
	return out[max(len(out)-store.KeptAttempts, 0):], nil
}

// cancelChunk is how many jobs CancelMatching cancels per transaction.
const cancelChunk = 1000

// CancelMatching cancels the QUEUED and PROCESSING jobs f selects, in
// transactions of cancelChunk jobs by ID, up to the newest job there was
// when it began, and returns how many it cancelled.
func (j Jobs[R]) CancelMatching(ctx context.Context, f store.Filter) (int64, error) {
	if len(f.Statuses) > 0 {
		f.Statuses = slices.DeleteFunc(slices.Clone(f.Statuses), func(s string) bool { return s != "QUEUED" && s != "PROCESSING" })
		if len(f.Statuses) == 0 {
			return 0, nil
		}
	}
	var newest []R
	if err := j.Store.Jobs(ctx, j.DB, store.Filter{Newest: true}, 1, &newest); err != nil || len(newest) == 0 {
		return 0, err
	}
	f.BeforeID = j.View(&newest[0]).ID + 1
	var n int64
	for {
		var ids []int64
		err := j.Store.Tx(ctx, j.DB, func(tx *gorm.DB) (err error) {
			ids, err = j.Store.CancelJobs(tx, f, cancelChunk)
			return err
		})
		if err != nil {
			return n, err
		}
		n += int64(len(ids))
		if len(ids) < cancelChunk {
			return n, nil
		}
		f.AfterID = ids[len(ids)-1]
	}
}

// Errors are the sentinels Transition wraps.
type Errors struct{ NotFound, WrongStatus, Invalid error }

// Transition locks job id, checks that its status is one of from, applies
// update and reads the job afterwards with read, in one transaction. A
// retry (op "retry") must leave the job under maxAttempts attempts in all.
func Transition(ctx context.Context, st store.Store, db *gorm.DB, errs Errors, id int64, op string, from []string, maxAttempts int,
	update func(tx *gorm.DB) error, read func(tx *gorm.DB) error) error {
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		was, found, err := st.LockStatus(tx, id)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %d", errs.NotFound, id)
		}
		if !slices.Contains(from, was) {
			return fmt.Errorf("%w: cannot %s job %d, it is %s", errs.WrongStatus, op, id, was)
		}
		if op == "retry" {
			attempts, max, err := st.Attempts(tx, id)
			if err != nil {
				return err
			}
			if attempts+max >= maxAttempts {
				return fmt.Errorf("%w: job %d has had %d attempts; it cannot be retried again", errs.Invalid, id, attempts)
			}
		}
		if err := update(tx); err != nil {
			return err
		}
		return read(tx)
	})
}

// Expected reports whether err is one of errs's, to return as it is.
func (errs Errors) Expected(err error) bool {
	return errors.Is(err, errs.NotFound) || errors.Is(err, errs.WrongStatus)
}

// Children returns the jobs that the rules released when job completed:
// the child of each one-to-one rule, and of each many-to-one rule of its
// period that lists it among its parents, in ID order.
func (j Jobs[R]) Children(ctx context.Context, job Job, rules []runner.Dependency) ([]R, error) {
	var keys []string
	for _, ru := range rules {
		switch {
		case ru.Each:
			keys = append(keys, runner.ChildKey(ru.Name, runner.EachGroup(job.ID)))
		case job.Period != nil:
			keys = append(keys, runner.ChildKey(ru.Name, runner.PeriodGroup(*job.Period)))
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	found, err := j.Read(ctx, store.Filter{IdempotencyKeys: keys})
	if err != nil {
		return nil, err
	}
	out := found[:0]
	for i := range found {
		if slices.Contains(j.View(&found[i]).ParentIDs, job.ID) {
			out = append(out, found[i])
		}
	}
	return out, nil
}
