package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A run's review is counted by the database: its jobs by kind and status
// with each pair's first start, its failures grouped by error and kind
// with the first few IDs of each group and a bound on the rows read, its
// slow jobs by run time to the microsecond, its kinds and periods; the
// same on every store.
func TestReviewQueries(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		run, other := "nightly", "other"
		mon, tue := "2026-11-23", "2026-11-24"
		job := func(kind, run, period string) store.NewJob {
			return store.NewJob{Kind: kind, Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run, Period: &period}
		}
		jobs := []store.NewJob{
			job("a", run, tue), job("a", run, tue), job("a", run, tue), job("a", run, tue), // failed: x, x, x, no error
			job("a", run, mon), job("a", run, mon), job("a", run, mon), // completed in 1.5 s and 2.5 s; queued
			job("b", run, tue), job("b", run, tue), job("b", run, tue), // failed: x, x, y
			job("c", other, tue), // failed: x, in another run
		}
		var dest []struct{ ID int64 }
		require.NoError(t, st.Insert(ctx, db, jobs, &dest))
		id := func(i int) int64 { return dest[i].ID }
		start := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
		end := func(i int, status string, lastError any, startAt time.Time, took time.Duration) {
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = ?, last_error = ?, started_at = ?, completed_at = ? WHERE id = ?",
				status, lastError, dbTime(st, startAt), dbTime(st, startAt.Add(took)), id(i)).Error)
		}
		for _, i := range []int{0, 1, 2, 7, 8, 10} {
			end(i, "FAILED", "x", start.Add(time.Duration(i)*time.Second), time.Second)
		}
		end(3, "FAILED", nil, start, time.Second)
		end(9, "FAILED", "y", start, time.Second)
		end(4, "COMPLETED", nil, start.Add(time.Minute), 1500*time.Millisecond)
		end(5, "COMPLETED", nil, start.Add(2*time.Minute), 2500*time.Millisecond)

		f := store.Filter{RunID: run}
		counts, _, err := store.CountKindStatus(ctx, st, db, f)
		require.NoError(t, err)
		require.Equal(t, []store.KindStatus{
			{Kind: "a", Status: "COMPLETED", N: 2, FirstStart: start.Add(time.Minute)},
			{Kind: "a", Status: "FAILED", N: 4, FirstStart: start},
			{Kind: "a", Status: "QUEUED", N: 1},
			{Kind: "b", Status: "FAILED", N: 3, FirstStart: start},
		}, utcStarts(counts))

		samples, err := store.ErrorSamples(ctx, st, db, f, 2, 100)
		require.NoError(t, err)
		require.Equal(t, []store.ErrorSample{
			{Error: "x", Kind: "a", N: 3, IDs: []int64{id(0), id(1)}},
			{Error: "x", Kind: "b", N: 2, IDs: []int64{id(7), id(8)}},
			{Error: "", Kind: "a", N: 1, IDs: []int64{id(3)}},
			{Error: "y", Kind: "b", N: 1, IDs: []int64{id(9)}},
		}, samples, "the largest group first, each with its first two IDs")
		samples, err = store.ErrorSamples(ctx, st, db, f, 2, 3)
		require.NoError(t, err)
		require.Equal(t, []store.ErrorSample{
			{Error: "x", Kind: "a", N: 3, IDs: []int64{id(0), id(1)}},
			{Error: "x", Kind: "b", N: 2, IDs: []int64{id(7)}},
		}, samples, "three rows read")

		slow, _, err := store.CountKindStatus(ctx, st, db, store.Filter{RunID: run, RunAtLeast: map[string]time.Duration{"a": 2 * time.Second, "b": 0}})
		require.NoError(t, err)
		require.Equal(t, []store.KindStatus{{Kind: "a", Status: "COMPLETED", N: 1, FirstStart: start.Add(2 * time.Minute)}}, utcStarts(slow))
		ids, total, err := store.CountedPage(ctx, st, db, store.Filter{RunID: run, RunAtLeast: map[string]time.Duration{"a": time.Second}}, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{id(4)}, ids, "the first of the page")
		require.EqualValues(t, 2, total, "and all it selects")
		ids, total, err = store.CountedPage(ctx, st, db, store.Filter{RunID: run, RunAtLeast: map[string]time.Duration{"a": time.Hour}}, 1)
		require.NoError(t, err)
		require.Empty(t, ids)
		require.Zero(t, total)

		kinds, err := store.Kinds(ctx, st, db, f)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, kinds)
		periods, err := store.Periods(ctx, st, db, f, 10)
		require.NoError(t, err)
		require.Equal(t, []string{mon, tue}, periods)
		periods, err = store.Periods(ctx, st, db, f, 1)
		require.NoError(t, err)
		require.Equal(t, []string{mon}, periods)
	})
}

// utcStarts returns counts with their first starts in UTC, for comparing
// with ==: the stores return them in the connection's location.
func utcStarts(counts []store.KindStatus) []store.KindStatus {
	for i, c := range counts {
		if !c.FirstStart.IsZero() {
			counts[i].FirstStart = c.FirstStart.UTC()
		}
	}
	return counts
}
