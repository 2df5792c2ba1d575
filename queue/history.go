package queue

import (
	"context"
	"encoding/json"
	"fmt"
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
	rows, err := maintain.History(ctx, c.st, c.db, q.Kind, q.Queue, from, to)
	if err != nil {
		return nil, fmt.Errorf("queue: history: %w", notMigrated(err))
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
