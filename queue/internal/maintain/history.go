package maintain

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
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

// Typical is the median of the daily medians of kind's completed jobs, and
// of their daily 95th percentiles, on its last days days with any in the
// year before before's day; zero without any. The review compares a night
// with it once the jobs it would have compared with are pruned.
func Typical(ctx context.Context, st store.Store, db *gorm.DB, kind string, before time.Time, days int) (store.Baseline, error) {
	to := Day(before)
	rows, err := st.Days(ctx, db, store.DayQuery{Kind: kind,
		From: to.AddDate(-1, 0, 0).Format(store.DayLayout), To: to.Format(store.DayLayout)})
	if err != nil {
		return store.Baseline{}, err
	}
	var p50s, p95s []time.Duration
	for i := len(rows) - 1; i >= 0 && len(p50s) < days; i-- {
		if rows[i].Completed > 0 {
			p50s = append(p50s, time.Duration(rows[i].P50us)*time.Microsecond)
			p95s = append(p95s, time.Duration(rows[i].P95us)*time.Microsecond)
		}
	}
	if len(p50s) == 0 {
		return store.Baseline{}, nil
	}
	slices.Sort(p50s)
	slices.Sort(p95s)
	return store.Baseline{Median: p50s[len(p50s)/2], P95: p95s[len(p95s)/2], Days: len(p50s)}, nil
}

// HistoryQuery is queue.HistoryQuery field for field.
type HistoryQuery struct {
	Kind, Queue string
	From, To    time.Time
}

// DayStats is queue.DayStats field for field.
type DayStats struct {
	Day                                   time.Time
	Kind, Queue                           string
	Completed, Failed, Cancelled, Retries int64
	P50, P95, Max                         time.Duration
	Errors                                map[string]int64
}

// Days checks q, covering at most most days, and returns the day roll-ups
// it selects (see History), as queue's History does.
func Days(ctx context.Context, st store.Store, db *gorm.DB, q HistoryQuery, most int) ([]DayStats, error) {
	if q.To.IsZero() {
		q.To = time.Now()
	}
	from, to := Day(q.From), Day(q.To.Add(-time.Nanosecond)).AddDate(0, 0, 1)
	switch {
	case q.From.IsZero():
		return nil, check.Invalid("history needs a From")
	case !q.From.Before(q.To):
		return nil, check.Invalid("history: From %v is not before To %v", q.From, q.To)
	case to.Sub(from) > time.Duration(most)*24*time.Hour:
		return nil, check.Invalid("history covers at most %d days", most)
	}
	if err := check.Texts("HistoryQuery.Kind", q.Kind, "HistoryQuery.Queue", q.Queue); err != nil {
		return nil, err
	}
	rows, err := History(ctx, st, db, q.Kind, q.Queue, from, to)
	if err != nil {
		return nil, check.Failed(ctx, "history", err)
	}
	out := make([]DayStats, 0, len(rows))
	for _, r := range rows {
		s, err := dayStats(r)
		if err != nil {
			return nil, fmt.Errorf("queue: history: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

func dayStats(r store.DayRow) (DayStats, error) {
	day, err := time.Parse(store.DayLayout, r.Day)
	if err != nil {
		return DayStats{}, err
	}
	s := DayStats{Day: day, Kind: r.Kind, Queue: r.Queue, Completed: r.Completed, Failed: r.Failed, Cancelled: r.Cancelled,
		Retries: r.Retries, P50: time.Duration(r.P50us) * time.Microsecond, P95: time.Duration(r.P95us) * time.Microsecond,
		Max: time.Duration(r.MaxUsec) * time.Microsecond}
	if len(r.Errors) > 0 {
		if err := json.Unmarshal(r.Errors, &s.Errors); err != nil {
			return DayStats{}, fmt.Errorf("errors of %s: %w", r.Day, err)
		}
	}
	return s, nil
}
