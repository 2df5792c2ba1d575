package store_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A checkpoint moves what the process wrote in its turn from SQLite's
// write-ahead log into the database file; with nothing written in its turn
// since the last, it does nothing.
func TestSQLiteCheckpoint(t *testing.T) {
	t.Parallel()
	db := pgtest.NewMigratedSQLite(t, "queue", migrate)
	st, err := store.Open(db.Gorm)
	require.NoError(t, err)
	cp, ok := st.(store.Checkpointer)
	require.True(t, ok, "the SQLite store checkpoints")
	var file string
	require.NoError(t, db.Gorm.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error)
	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(file)
		require.NoError(t, err)
		return fi.Size()
	}
	ctx := context.Background()
	payload := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	jobs := make([]store.NewJob, 200)
	for i := range jobs {
		jobs[i] = store.NewJob{Kind: "report", Queue: "q", Priority: 5, Attempts: 1, Payload: payload}
	}
	insertJobs(t, st, db.Gorm, jobs[:1]...)
	require.NoError(t, cp.Checkpoint(ctx))
	before := size()

	insertJobs(t, st, db.Gorm, jobs...)
	require.Equal(t, before, size(), "in the log until a checkpoint")
	require.NoError(t, cp.Checkpoint(ctx))
	after := size()
	require.Greater(t, after, before+200*2000)

	// Written outside the process's turn (as a caller's transaction
	// writes): left to SQLite, or to a checkpoint after the next write in
	// the turn.
	require.NoError(t, db.Gorm.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
		INSERT INTO sheaf_jobs (kind, queue, payload) SELECT 'report', 'q', ? FROM n`, payload).Error)
	require.NoError(t, cp.Checkpoint(ctx))
	require.Equal(t, after, size())
	insertJobs(t, st, db.Gorm, jobs[:1]...)
	require.NoError(t, cp.Checkpoint(ctx))
	require.Greater(t, size(), after+200*2000)
}
