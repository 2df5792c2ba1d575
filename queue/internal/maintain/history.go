package maintain

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// History returns the day roll-ups of kind and queue ("" for any) from the
// day of from to the day before to: the final days' as stored, the others
// (today among them) rolled up from the jobs as they are now.
func History(ctx context.Context, st store.Store, db *gorm.DB, kind, queue string, from, to time.Time) ([]store.DayRow, error) {
	fb, err := st.FinalBefore(ctx)
	if err != nil {
		return nil, err
	}
	live := from // the first day read from the jobs
	if fb != "" {
		final, err := time.Parse(store.DayLayout, fb)
		if err != nil {
			return nil, err
		}
		switch {
		case final.After(to):
			live = to
		case final.After(from):
			live = final
		}
	}
	rows, err := st.Days(ctx, db, store.DayQuery{Kind: kind, Queue: queue,
		From: from.Format(store.DayLayout), To: live.Format(store.DayLayout)})
	if err != nil {
		return nil, err
	}
	for d := live; d.Before(to); d = d.AddDate(0, 0, 1) {
		day, err := RollDay(ctx, st, d)
		if err != nil {
			return nil, err
		}
		for _, r := range day {
			if (kind == "" || r.Kind == kind) && (queue == "" || r.Queue == queue) {
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// Typical is the median of the daily medians of kind's completed jobs, on
// its last days days with any in the year before before's day; 0 without
// any. The review compares a night with it once the jobs it would have
// compared with are pruned.
func Typical(ctx context.Context, st store.Store, db *gorm.DB, kind string, before time.Time, days int) (time.Duration, error) {
	to := Day(before)
	rows, err := st.Days(ctx, db, store.DayQuery{Kind: kind,
		From: to.AddDate(-1, 0, 0).Format(store.DayLayout), To: to.Format(store.DayLayout)})
	if err != nil {
		return 0, err
	}
	var medians []time.Duration
	for i := len(rows) - 1; i >= 0 && len(medians) < days; i-- {
		if rows[i].Completed > 0 {
			medians = append(medians, time.Duration(rows[i].P50us)*time.Microsecond)
		}
	}
	if len(medians) == 0 {
		return 0, nil
	}
	slices.Sort(medians)
	return medians[len(medians)/2], nil
}
