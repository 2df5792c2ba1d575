package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	gormsqlite "github.com/libtnb/sqlite"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// On SQLite, a list of failed or cancelled jobs, or of a run's, reads the
// index of those jobs rather than the whole table or the run: the filter repeats the index's
// predicate, which the schema must keep word for word.
func TestSQLiteListsFailedJobsThroughTheirIndex(t *testing.T) {
	require.Contains(t, strings.Join(sqliteMigrations, "\n"), "ON sheaf_jobs (status, id) WHERE "+failedIndexPredicate+";")
	sqlDB, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "jobs.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	db, err := gorm.Open(gormsqlite.New(gormsqlite.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	st, err := Open(db)
	require.NoError(t, err)
	_, err = st.Migrate(context.Background())
	require.NoError(t, err)

	plan := func(f Filter) string {
		var rows []map[string]any
		q := f.apply(db.Session(&gorm.Session{DryRun: true}).Table(JobsTable), sqliteTime).Order(f.order()).Limit(50).Find(&rows)
		var steps []struct{ Detail string }
		require.NoError(t, db.Raw("EXPLAIN QUERY PLAN "+q.Statement.SQL.String(), q.Statement.Vars...).Scan(&steps).Error)
		var details []string
		for _, s := range steps {
			details = append(details, s.Detail)
		}
		return strings.Join(details, "; ")
	}
	for _, statuses := range [][]string{{"FAILED"}, {"CANCELLED"}, {"FAILED", "CANCELLED"}} {
		require.Contains(t, plan(Filter{Kinds: []string{"report"}, Statuses: statuses, Newest: true}), "sheaf_jobs_failed", "%v", statuses)
	}
	require.NotContains(t, plan(Filter{Statuses: []string{"FAILED", "QUEUED"}, Newest: true}), "sheaf_jobs_failed",
		"queued jobs are not in the index")
	// A run's, the review's lists of failures, once the planner knows a
	// run: 300 jobs, six of them failed.
	require.NoError(t, db.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 300)
		INSERT INTO sheaf_jobs (kind, payload, status, run_id)
		SELECT 'report', '{}', CASE WHEN n % 50 = 0 THEN 'FAILED' ELSE 'COMPLETED' END, 'nightly@2026-11-26T23:00:00Z' FROM g`).Error)
	require.NoError(t, st.Analyze(context.Background()))
	for _, statuses := range [][]string{{"FAILED"}, {"FAILED", "CANCELLED"}} {
		require.Contains(t, plan(Filter{RunID: "nightly@2026-11-26T23:00:00Z", Statuses: statuses}), "sheaf_jobs_run_failed", "%v", statuses)
	}
}
