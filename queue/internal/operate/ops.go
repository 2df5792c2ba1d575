// Package operate computes what package queue's Client reports to operators:
// the morning review, the queues at a glance, a job's attempts, the runs,
// the children of a job and the schedules' states, and cancelling by
// filter. Every statement is package store's.
//
// It cannot import package queue, which imports it, so it works on
// queue's job record type R through Jobs.View, and returns types whose
// fields mirror queue's, which queue converts.
package operate

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Job is what the operations read of a job record.
type Job struct {
	ID                     int64
	Kind, Status           string
	Attempts, Claims       int
	Period, LockedBy       *string
	StartedAt, CompletedAt *time.Time
	ParentIDs              []int64
}

// Jobs reads job records of type R on a store.
type Jobs[R any] struct {
	Store store.Store
	DB    *gorm.DB // the pool, or a caller's transaction
	// View is what the operations read of a record.
	View func(*R) Job
	// Errs are the sentinels the operations wrap.
	Errs Errors
}

// Read returns the records f selects, all of them.
func (j Jobs[R]) Read(ctx context.Context, f store.Filter) ([]R, error) {
	var out []R
	err := j.Store.Jobs(ctx, j.DB, f, 0, &out)
	return out, err
}

// Tick is a schedule's tick, as queue.Tick.
type Tick struct {
	Schedule string
	At       time.Time
	RunID    string
	Period   string
}

// TickOf is the Tick of the runner's tick t of the schedule name.
func TickOf(name string, t runner.Tick) Tick {
	return Tick{Schedule: name, At: t.At, RunID: t.RunID, Period: t.Period}
}
