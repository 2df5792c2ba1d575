package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Analyze gives the planner the table's size and statistics of the columns
// a claim filters and sorts on, and leaves the connection's statistics
// target as it found it.
func TestAnalyzeGivesTheClaimsStatistics(t *testing.T) {
	pgtest.PostgresOnly(t, "the statistics are PostgreSQL's")
	t.Parallel()
	db := pgtest.New(t)
	sqlDB, err := db.Gorm.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // Analyze and the checks after it on one connection
	st, err := store.Open(db.Gorm)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = st.Migrate(ctx)
	require.NoError(t, err)
	jobs := make([]store.NewJob, 500)
	for i := range jobs {
		jobs[i] = store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`}
	}
	_, err = st.Copy(ctx, jobs)
	require.NoError(t, err)
	var target string
	require.NoError(t, db.Gorm.Raw("SHOW default_statistics_target").Scan(&target).Error)

	require.NoError(t, st.Analyze(ctx))
	var columns []string
	require.NoError(t, db.Gorm.Raw(`SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = ?
		ORDER BY attname`, store.JobsTable).Scan(&columns).Error)
	require.Equal(t, []string{"kind", "priority", "queue", "rescues", "run_at", "status"}, columns)
	var tuples float64
	require.NoError(t, db.Gorm.Raw("SELECT reltuples FROM pg_class WHERE oid = ?::regclass", store.JobsTable).Scan(&tuples).Error)
	require.Equal(t, float64(len(jobs)), tuples)
	var after string
	require.NoError(t, db.Gorm.Raw("SHOW default_statistics_target").Scan(&after).Error)
	require.Equal(t, target, after)
}
