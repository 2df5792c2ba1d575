package maintain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/errshape"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Defaults of the roll-up task.
const (
	// RollupEvery is how often the roll-up task looks for days to make
	// final.
	RollupEvery = 10 * time.Minute
	// RollupGrace is how long after a day ends its roll-up becomes final:
	// a job's finish time is its statement's, and its transaction may
	// commit a moment later.
	RollupGrace = 5 * time.Minute
	// rollupDays bounds the days one Run makes final, so that a first
	// roll-up of a long history returns to its leader now and then.
	rollupDays = 31
	// errorGroups bounds the error shapes a day's row keeps; the rest
	// are counted under OtherErrors.
	errorGroups = 20
	// errorShapeLen bounds an error shape's length, in bytes.
	errorShapeLen = 200
)

// OtherErrors counts the failures of the error shapes past the first
// errorGroups of a day.
const OtherErrors = "(other)"

// Rollup is the Task that keeps the day roll-ups (UTC days): it makes
// final, oldest first, every day that ended RollupGrace ago or more, and
// drops roll-ups older than Keep. Rewriting a day replaces its rows, so a
// Run cut short, or run twice, leaves the same rows. A final day is never
// rolled up again: the pruner deletes its jobs. A day not final yet has no
// rows: whoever reads it (History, Stats) reads its jobs, which are all
// still there, and a row of a day in progress would cost a read of the
// whole day at every round, and at every new leader's start, for nothing.
type Rollup struct {
	Store store.Keeper
	// Keep is how long roll-ups are kept; negative: forever.
	Keep time.Duration
	// Every is the delay between rounds; 0: RollupEvery.
	Every time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Task.
func (*Rollup) Name() string { return "rollup" }

// Run implements Task.
func (r *Rollup) Run(ctx context.Context) (time.Duration, error) {
	every := cmp.Or(r.Every, RollupEvery)
	now := clock(r.Now)
	today := Day(now)
	next, err := r.firstNotFinal(ctx, today)
	if err != nil {
		return every, fmt.Errorf("rollup: %w", err)
	}
	for n := 0; !now.Before(next.AddDate(0, 0, 1).Add(RollupGrace)); n++ {
		if n == rollupDays {
			return 0, nil // more to come: at once, after the leader's other tasks
		}
		if err := r.put(ctx, next); err != nil {
			return every, err
		}
		next = next.AddDate(0, 0, 1)
	}
	if r.Keep > 0 {
		if _, err := r.Store.DropDays(ctx, Day(now.Add(-r.Keep)).Format(store.DayLayout)); err != nil {
			return every, fmt.Errorf("rollup: drop old days: %w", err)
		}
	}
	return every, nil
}

// firstNotFinal is the first day to roll up: the one after the last final
// day, or, before the first roll-up, the day of the oldest finished job
// (today if there is none).
func (r *Rollup) firstNotFinal(ctx context.Context, today time.Time) (time.Time, error) {
	fb, err := r.Store.FinalBefore(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if fb != "" {
		return time.Parse(store.DayLayout, fb)
	}
	first, ok, err := r.Store.FirstFinished(ctx)
	if err != nil || !ok {
		return today, err
	}
	return Day(first), nil
}

// put makes day's roll-up final.
func (r *Rollup) put(ctx context.Context, day time.Time) error {
	rows, err := RollDay(ctx, r.Store, day)
	if err != nil {
		return err
	}
	if err := r.Store.PutDay(ctx, day.Format(store.DayLayout), rows); err != nil {
		return fmt.Errorf("rollup: write %s: %w", day.Format(store.DayLayout), err)
	}
	return nil
}

// Day is the UTC day t falls in, as its midnight.
func Day(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now().UTC()
	}
	return now().UTC()
}

// RollDay reads the jobs that finished on day (a UTC midnight) and rolls
// them up by kind and queue: counts by status, retries (attempts past the
// first), run times of the completed jobs (median, 95th percentile by
// nearest rank, and maximum) and failures by error shape.
func RollDay(ctx context.Context, st store.Keeper, day time.Time) ([]store.DayRow, error) {
	type key struct{ kind, queue string }
	type acc struct {
		row    store.DayRow
		runs   []time.Duration
		errors map[string]int64
	}
	accs := map[key]*acc{}
	err := st.Finished(ctx, day, day.AddDate(0, 0, 1), func(j store.FinishedJob) {
		k := key{j.Kind, j.Queue}
		a := accs[k]
		if a == nil {
			a = &acc{row: store.DayRow{Day: day.Format(store.DayLayout), Kind: j.Kind, Queue: j.Queue}, errors: map[string]int64{}}
			accs[k] = a
		}
		a.row.Retries += int64(max(j.Attempts-1, 0))
		switch j.Status {
		case "COMPLETED":
			a.row.Completed++
			if j.Started != nil && j.Finished != nil && !j.Finished.Before(*j.Started) {
				a.runs = append(a.runs, j.Finished.Sub(*j.Started))
			}
		case "FAILED":
			a.row.Failed++
			msg := ""
			if j.LastError != nil {
				msg = errshape.Of(*j.LastError)
			}
			a.errors[truncate(msg, errorShapeLen)]++
		case "CANCELLED":
			a.row.Cancelled++
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rollup: read %s: %w", day.Format(store.DayLayout), err)
	}
	out := make([]store.DayRow, 0, len(accs))
	for _, a := range accs {
		if n := len(a.runs); n > 0 {
			slices.Sort(a.runs)
			a.row.P50us = a.runs[rank(n, 50)].Microseconds()
			a.row.P95us = a.runs[rank(n, 95)].Microseconds()
			a.row.MaxUsec = a.runs[n-1].Microseconds()
		}
		if len(a.errors) > 0 {
			b, err := json.Marshal(topErrors(a.errors))
			if err != nil {
				return nil, err
			}
			a.row.Errors = b
		}
		out = append(out, a.row)
	}
	slices.SortFunc(out, func(a, b store.DayRow) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Queue, b.Queue)) })
	return out, nil
}

// rank is the index of the p-th percentile of n sorted values, by
// nearest rank.
func rank(n, p int) int {
	return max((n*p+99)/100-1, 0)
}

// topErrors keeps the errorGroups largest groups and counts the others
// under OtherErrors.
func topErrors(m map[string]int64) map[string]int64 {
	if len(m) <= errorGroups {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := make(map[string]int64, errorGroups+1)
	for i, k := range keys {
		if i < errorGroups {
			out[k] = m[k]
		} else {
			out[OtherErrors] += m[k]
		}
	}
	return out
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
