package maintain

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Defaults of the hour roll-up task.
const (
	// HoursEvery is how often the hours that ended are rolled up: an hour
	// is final some RollupGrace to HoursEvery after it ends, and until then
	// the activity series reads its jobs.
	HoursEvery = 10 * time.Minute
	// rollupHours bounds the hours one Run makes final, so that a first
	// roll-up of a long history returns to its leader now and then.
	rollupHours = 48
)

// HourRollup is the Task that keeps the hour roll-ups of the activity
// series: it makes final, oldest first, every hour that ended RollupGrace
// ago or more, from the one after the last final hour (before the first
// roll-up: the hour of the oldest finished job, but not before Keep ago),
// and drops the roll-ups older than Keep. Rolling an hour up replaces its
// rows and moves the first hour not final past it in one transaction, so a
// Run cut short, or run twice, neither counts an hour twice nor skips one.
type HourRollup struct {
	Store store.Store
	// Keep is how long roll-ups are kept; negative: forever.
	Keep time.Duration
	// Every is the delay between rounds; 0: HoursEvery.
	Every time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Task.
func (*HourRollup) Name() string { return "hour rollup" }

// Run implements Task.
func (r *HourRollup) Run(ctx context.Context) (time.Duration, error) {
	every := cmp.Or(r.Every, HoursEvery)
	now := clock(r.Now)
	next, err := r.firstNotFinal(ctx, now)
	if err != nil {
		return every, fmt.Errorf("hour rollup: %w", err)
	}
	for n := 0; !now.Before(next.Add(time.Hour + RollupGrace)); n++ {
		if n == rollupHours {
			return 0, nil // more to come: at once, after the leader's other tasks
		}
		if err := r.Store.RollHour(ctx, next); err != nil {
			return every, fmt.Errorf("hour rollup: %s: %w", next.Format(time.RFC3339), err)
		}
		next = next.Add(time.Hour)
	}
	if r.Keep > 0 {
		if _, err := r.Store.DropHours(ctx, now.Add(-r.Keep).Truncate(time.Hour)); err != nil {
			return every, fmt.Errorf("hour rollup: drop old hours: %w", err)
		}
	}
	return every, nil
}

// firstNotFinal is the first hour to roll up.
func (r *HourRollup) firstNotFinal(ctx context.Context, now time.Time) (time.Time, error) {
	_, final, ok, err := r.Store.HoursFinal(ctx)
	if err != nil || ok {
		return final, err
	}
	first, ok, err := r.Store.FirstFinished(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		first = now
	}
	if r.Keep > 0 {
		first = later(first, now.Add(-r.Keep))
	}
	return first.UTC().Truncate(time.Hour), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
