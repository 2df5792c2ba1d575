package queue

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
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
	days, err := maintain.Days(ctx, c.st, c.db, maintain.HistoryQuery(q), maxHistoryDays)
	return converted(days, func(d maintain.DayStats) DayStats { return DayStats(d) }), err
}
