package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// A process killed with SIGKILL in the middle of a prune batch, its
// transaction open: the batches before it are gone whole, jobs with their
// attempts and audit entries; the batch it was in is kept whole; and the
// next prune deletes the rest. No attempt or audit entry outlives its job,
// and no job kept loses one.
func TestKilledPruneDeletesWholeBatchesOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.client = dayOfHoursClient(t, e)
	const n = 1_500 // a batch of 1,000, then the one the process dies in
	jobTarget := "jsonb_build_object('job', id)"
	if pgtest.Store() != "postgres" {
		jobTarget = "json_object('job', id)"
	}
	old := e.db.Time(e.db.Now(t).AddDate(0, 0, -40))
	series := `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
		INSERT INTO sheaf_jobs (kind, status, attempts, created_at, started_at, completed_at, payload)
		SELECT 'report', 'COMPLETED', 1, ?, ?, ?, '{}' FROM g`
	if pgtest.Store() == "mysql" { // MariaDB puts the INSERT first
		series = `SET STATEMENT max_recursive_iterations = 100000 FOR INSERT INTO sheaf_jobs (kind, status, attempts, created_at, started_at, completed_at, payload)
		WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
		SELECT 'report', 'COMPLETED', 1, ?, ?, ?, '{}' FROM g`
	}
	require.NoError(t, e.db.Gorm.Exec(series, n, old, old, old).Error)
	require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome)
		SELECT id, 1, 'r', started_at, completed_at, 'completed' FROM sheaf_jobs`).Error)
	require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_audit (actor, action, target, result)
		SELECT 'op', 'retry', `+jobTarget+`, 'ok' FROM sheaf_jobs`).Error)

	p := startChild(t, e.db.DSN, "pruner", time.Second, nil, childPruneEnv+"=2")
	require.Equal(t, "archiving 500", p.expect(t, "archiving"))
	p.kill(t)

	count := func(q string) int64 { return e.db.Count(t, q) }
	orphans := func() {
		t.Helper()
		require.Zero(t, count("SELECT count(*) FROM sheaf_attempts a WHERE NOT EXISTS (SELECT 1 FROM sheaf_jobs j WHERE j.id = a.job_id)"),
			"no attempt outlives its job")
		require.Zero(t, count("SELECT count(*) FROM sheaf_jobs j WHERE NOT EXISTS (SELECT 1 FROM sheaf_attempts a WHERE a.job_id = j.id)"),
			"no job kept lost its attempt")
		require.Equal(t, count("SELECT count(*) FROM sheaf_jobs"), count("SELECT count(*) FROM sheaf_audit"),
			"an audit entry goes with its job, and only with it")
	}
	require.Equal(t, int64(n-1_000), count("SELECT count(*) FROM sheaf_jobs"), "the first batch is gone, the second kept")
	orphans()
	if pgtest.Store() != "sqlite" {
		// The server rolls the dead process's transaction back once it
		// notices its connection gone, which a loaded machine delays; until
		// then the prune, which skips locked rows, would delete none.
		require.Eventually(t, func() bool {
			return count("SELECT count(*) FROM (SELECT id FROM sheaf_jobs FOR UPDATE SKIP LOCKED) free") == int64(n-1_000)
		}, 30*time.Second, 10*time.Millisecond, "the dead process's rows are still locked")
	}

	pruned, err := e.client.Prune(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(n-1_000), pruned, "the next prune deletes the batch the dead process held")
	require.Zero(t, count("SELECT count(*) FROM sheaf_jobs"))
	orphans()
}
