package maintain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A first roll-up of a long history makes 31 days final per Run, oldest
// first, and asks to run again at once, and writes nothing of today; a
// day's row has its percentiles
// and its errors, the 20 largest shapes and the rest as one; roll-ups past
// Keep are dropped, and the pruner deletes nothing of a day, or an hour,
// not final.
func TestRollupOfALongHistory(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"postgres", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newDB := pgtest.NewSQLite
			if name == "postgres" {
				newDB = pgtest.New
			}
			db := newDB(t)
			st, err := store.Open(db.Gorm)
			require.NoError(t, err)
			ctx := context.Background()
			_, err = st.Migrate(ctx)
			require.NoError(t, err)
			first := time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)
			// Day 0: twenty completed jobs of 1s to 20s, and 22 failures of
			// as many shapes; days 1 to 39: one completed job each. In one
			// statement: 314 commits of their own took seconds.
			var jobs [][]any
			add := func(status string, start time.Time, took time.Duration, lastErr any) {
				jobs = append(jobs, []any{status, db.Time(start), db.Time(start.Add(took)), lastErr})
			}
			for i := 1; i <= 20; i++ {
				add("COMPLETED", first.Add(time.Hour), time.Duration(i)*time.Second, nil)
			}
			for i := range 22 {
				for range 22 - i { // shape i fails 22-i times: the two smallest go to "(other)"
					add("FAILED", first.Add(time.Hour), time.Second, fmt.Sprintf("feed %c down for 3s", 'a'+i))
				}
			}
			for d := 1; d < 40; d++ {
				add("COMPLETED", first.AddDate(0, 0, d).Add(time.Hour), time.Second, nil)
			}
			add("COMPLETED", first.AddDate(0, 0, 40), time.Second, nil) // today's: kept
			insertJobs(t, db, "status, started_at, completed_at, last_error", jobs)
			now := first.AddDate(0, 0, 40).Add(time.Hour) // day 40, 01:00
			counted := &countingStore{Store: st}
			prune := &maintain.Prune{Store: counted, Now: func() time.Time { return now }, Batch: 10,
				Rules: func() []maintain.Keep { return []maintain.Keep{{Status: "COMPLETED", For: time.Hour}} }}
			next, err := prune.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, maintain.PruneEvery, next)
			require.EqualValues(t, 20+253+40, db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "nothing is rolled up yet")

			r := &maintain.Rollup{Store: st, Keep: 35 * 24 * time.Hour, Now: func() time.Time { return now }}
			next, err = r.Run(ctx)
			require.NoError(t, err)
			require.Zero(t, next, "more days to make final")
			fb, err := st.FinalBefore(ctx)
			require.NoError(t, err)
			require.Equal(t, "2025-11-01", fb, "31 days")
			next, err = r.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, maintain.RollupEvery, next)
			fb, err = st.FinalBefore(ctx)
			require.NoError(t, err)
			require.Equal(t, "2025-11-10", fb, "every day that is over")

			days, err := st.Days(ctx, db.Gorm, store.DayQuery{From: "2025-01-01", To: "2026-01-01"})
			require.NoError(t, err)
			require.Len(t, days, 35, "days 5 to 39: older ones are past Keep, and today, not over, has no row")
			require.Equal(t, "2025-10-06", days[0].Day)
			require.Equal(t, "2025-11-09", days[34].Day)

			rows, err := maintain.RollDay(ctx, st, first)
			require.NoError(t, err)
			require.Len(t, rows, 1)
			d := rows[0]
			require.Equal(t, store.DayRow{Day: "2025-10-01", Kind: "k", Queue: "default", Completed: 20, Failed: 253,
				P50us: 10e6, P95us: 19e6, MaxUsec: 20e6, Errors: d.Errors}, d)
			var errs map[string]int64
			require.NoError(t, json.Unmarshal(d.Errors, &errs))
			require.Len(t, errs, 21)
			require.EqualValues(t, 22, errs["feed a down for <n>s"])
			require.EqualValues(t, 3, errs[maintain.OtherErrors], "the two smallest shapes")
			require.NotContains(t, errs, "feed v down for <n>s")

			_, err = prune.Run(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 20+253+40, db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "no hour is rolled up yet")
			// Three days of hours: two Runs, the first of which asks for
			// more, and 72 hours made final rather than the 840 of the
			// days' Keep, each a transaction.
			hours := &maintain.HourRollup{Store: st, Keep: 3 * 24 * time.Hour, Now: func() time.Time { return now }}
			runs := 0
			for next = 0; next == 0; runs++ {
				next, err = hours.Run(ctx)
				require.NoError(t, err)
			}
			require.Equal(t, 2, runs)
			counted.finalBefore = 0
			batches := 0
			for range 10 {
				batches++
				if next, err = prune.Run(ctx); err != nil || next == maintain.PruneEvery {
					break
				}
			}
			require.NoError(t, err)
			require.Greater(t, batches, 5, "ten jobs a batch")
			require.Equal(t, 1, counted.finalBefore, "a pass reads how far the roll-ups go once, not once a batch")
			require.EqualValues(t, 253+1, db.Count(t, "SELECT count(*) FROM sheaf_jobs"),
				"the completed jobs of final days are gone; failures have no rule")
		})
	}
}

// countingStore counts the reads of how far the day roll-ups go.
type countingStore struct {
	store.Store
	finalBefore int
}

func (s *countingStore) FinalBefore(ctx context.Context) (string, error) {
	s.finalBefore++
	return s.Store.FinalBefore(ctx)
}

// insertJobs inserts, in one statement, a job of kind k, one attempt and
// an empty payload per row of values for columns.
func insertJobs(t *testing.T, db *pgtest.DB, columns string, rows [][]any) {
	t.Helper()
	var args []any
	values := make([]string, len(rows))
	for i, row := range rows {
		values[i] = "('k', 1, '{}'" + strings.Repeat(", ?", len(row)) + ")"
		args = append(args, row...)
	}
	require.NoError(t, db.Gorm.Exec("INSERT INTO sheaf_jobs (kind, attempts, payload, "+columns+") VALUES "+
		strings.Join(values, ", "), args...).Error)
}
