package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// HistoryQuery selects day roll-ups: the UTC days from From's to To's (To
// exclusive, zero: now, so today is in), of a kind and a queue if set.
type HistoryQuery struct {
	Kind, Queue string
	From, To    time.Time
}

// DayStats is one UTC day of a kind on a queue: its jobs that finished
// that day, counted by status; Retries counts their attempts past the
// first; P50, P95 and Max are the run times (start of the last attempt to
// completion) of the completed ones, the 95th percentile by nearest rank;
// Errors counts the failed ones by the shape of their last error (numbers,
// hex and UUIDs replaced, as the console groups failures), the 20 largest,
// the rest under "(other)".
type DayStats struct {
	Day                                   time.Time
	Kind, Queue                           string
	Completed, Failed, Cancelled, Retries int64
	P50, P95, Max                         time.Duration
	Errors                                map[string]int64
}

// maxHistoryDays bounds the days one History call covers.
const maxHistoryDays = 3660

// History returns the day roll-ups q selects, by day, kind and queue; days
// without finished jobs are left out. Roll-ups outlive the jobs they count
// (see Retention): the runners' maintenance makes a day's final once it is
// over and refreshes today's every 10 minutes; History reads the days not
// final yet, today's among them, from the jobs themselves, so they are up
// to date. It reads one row per kind, queue and final day.
func (c *ops) History(ctx context.Context, q HistoryQuery) ([]DayStats, error) {
	if q.To.IsZero() {
		q.To = time.Now()
	}
	from, to := maintain.Day(q.From), maintain.Day(q.To.Add(-time.Nanosecond)).AddDate(0, 0, 1)
	switch {
	case q.From.IsZero():
		return nil, invalid("history needs a From")
	case !q.From.Before(q.To):
		return nil, invalid("history: From %v is not before To %v", q.From, q.To)
	case to.Sub(from) > maxHistoryDays*24*time.Hour:
		return nil, invalid("history covers at most %d days", maxHistoryDays)
	}
	if err := checkTexts("HistoryQuery.Kind", q.Kind, "HistoryQuery.Queue", q.Queue); err != nil {
		return nil, err
	}
	fb, err := c.st.FinalBefore(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: history: %w", notMigrated(err))
	}
	live := from // the first day read from the jobs
	if fb != "" {
		final, err := time.Parse(store.DayLayout, fb)
		if err != nil {
			return nil, fmt.Errorf("queue: history: %w", err)
		}
		switch {
		case final.After(to):
			live = to
		case final.After(from):
			live = final
		}
	}
	rows, err := c.st.Days(ctx, c.db, store.DayQuery{Kind: q.Kind, Queue: q.Queue,
		From: from.Format(store.DayLayout), To: live.Format(store.DayLayout)})
	if err != nil {
		return nil, fmt.Errorf("queue: history: %w", notMigrated(err))
	}
	for d := live; d.Before(to); d = d.AddDate(0, 0, 1) {
		day, err := maintain.RollDay(ctx, c.st, d)
		if err != nil {
			return nil, fmt.Errorf("queue: history: %w", notMigrated(err))
		}
		for _, r := range day {
			if (q.Kind == "" || r.Kind == q.Kind) && (q.Queue == "" || r.Queue == q.Queue) {
				rows = append(rows, r)
			}
		}
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

// typicalFromHistory is the median of the daily medians of kind's
// completed jobs, on its last days days with any in the year before
// before's day; 0 without any.
func (c *ops) typicalFromHistory(ctx context.Context, kind string, before time.Time, days int) (time.Duration, error) {
	to := maintain.Day(before)
	rows, err := c.st.Days(ctx, c.db, store.DayQuery{Kind: kind,
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
