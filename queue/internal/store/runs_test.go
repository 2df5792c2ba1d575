package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// runTotals is what Runs says of each run: its counts by status, by run.
func runTotals(t *testing.T, st store.Store, db *gorm.DB) (order []string, counts map[string]map[string]int64) {
	t.Helper()
	rows, err := store.Runs(context.Background(), st, db, store.RunsQuery{Limit: 100})
	require.NoError(t, err)
	counts = map[string]map[string]int64{}
	for _, r := range rows {
		if counts[r.RunID] == nil {
			order = append(order, r.RunID)
			counts[r.RunID] = map[string]int64{}
		}
		counts[r.RunID][r.Status] = r.N
	}
	return order, counts
}

// A run is listed from its first job on, whichever statement inserted it;
// once it has finished, its counts are kept and outlive its jobs; a retry,
// or a job inserted into it, makes it counted job by job again.
func TestRunsKeepFinishedCounts(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		_, err := st.Migrate(ctx)
		require.NoError(t, err)
		text := func(s string) *string { return &s }
		job := func(run string) store.NewJob {
			return store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: text(run), Period: text("2026-11-24")}
		}
		var dest []struct{ ID int64 }
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job("first"), job("first"), {Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}}, &dest))
		_, err = st.Copy(ctx, []store.NewJob{job("second"), job("second"), job("second")})
		require.NoError(t, err)
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			_, err := st.InsertChild(tx, job("first"), []int64{dest[0].ID})
			return err
		}))

		order, counts := runTotals(t, st, db)
		require.Equal(t, []string{"second", "first"}, order, "newest first")
		require.Equal(t, map[string]int64{"QUEUED": 3}, counts["first"])
		require.Equal(t, map[string]int64{"QUEUED": 3}, counts["second"])

		// Nothing has finished: nothing is kept.
		kept, err := store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.Zero(t, kept)

		finish := func(run string) {
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED' WHERE run_id = ?", run).Error)
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'FAILED', attempts = 1 WHERE id = (SELECT max(id) FROM sheaf_jobs WHERE run_id = ?)", run).Error)
		}
		finish("first")
		kept, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.Equal(t, 1, kept, "only the finished run")

		// Pruned, the finished run keeps its counts.
		require.NoError(t, db.Exec("DELETE FROM sheaf_jobs WHERE run_id = 'first'").Error)
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 2, "FAILED": 1}, counts["first"])

		// A retried job opens its run again.
		finish("second")
		kept, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.Equal(t, 1, kept)
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			_, err := st.RetryFailed(tx, store.Filter{}, 100)
			return err
		}))
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 2, "QUEUED": 1}, counts["second"])
		kept, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.Zero(t, kept, "the retried run is open")

		// A job inserted into a finished run opens it again.
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job("first")}, &dest))
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"QUEUED": 1}, counts["first"], "counted from its jobs again")

		// Counts kept while a job was being inserted (older than the run's
		// newest job) are not read.
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'CANCELLED' WHERE run_id = 'first'").Error)
		kept, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.Equal(t, 1, kept)
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET max_id = max_id - 1 WHERE run_id = 'first'").Error)
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED' WHERE run_id = 'first'").Error)
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 1}, counts["first"])
	})
}
