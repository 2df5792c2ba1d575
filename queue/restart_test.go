package queue_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// The server restarts (in fast mode: every session is cut and its
// transaction rolled back) while a runner with default options works
// through 2,000 jobs. The runner rides it out: every job completes, none
// is left running or lost, no job's work is recorded more often than it
// had attempts, and a job enqueued after the restart runs too.
func TestRunnerRidesOutAServerRestart(t *testing.T) {
	pgtest.PostgresOnly(t, "it restarts a PostgreSQL server")
	t.Parallel()
	const n = 2_000
	cl := pgtest.NewCluster(t)
	require.NoError(t, cl.Gorm.Exec(`CREATE TABLE ledger (
		job_id bigint NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP)`).Error)
	reg := queue.NewRegistry()
	registerLedger(cl.Gorm, io.Discard)(reg)
	events := queuetest.NewEvents()
	c, err := queue.NewClient(cl.Gorm, reg, quiet(), queue.WithObserver(events))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Migrate(ctx))
	// A handler cut off by the restart fails its attempt, and one may fail
	// another on a connection the restart cut that its pool has not yet
	// found dead: more attempts than the default three, so that none runs
	// out of them.
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: ledgerJob{N: i}, Options: []queue.EnqueueOption{queue.MaxAttempts(10)}}
	}
	_, err = c.EnqueueBulk(ctx, jobs)
	require.NoError(t, err)

	queuetest.StartRunner(t, c)
	events.Wait(t, queue.EventCompleted, 0, n/5)
	cl.Restart(t)
	events.Wait(t, queue.EventCompleted, 0, n)

	late, err := c.Enqueue(ctx, ledgerJob{N: n})
	require.NoError(t, err, "the client's pool works again")
	events.Wait(t, queue.EventCompleted, late.Job.ID, 1)

	db := cl.DB
	require.Equal(t, int64(n+1), db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'COMPLETED'"), "every job completed")
	require.Zero(t, db.Count(t, `SELECT count(*) FROM sheaf_jobs j
		WHERE (SELECT count(*) FROM ledger l WHERE l.job_id = j.id) NOT BETWEEN 1 AND j.attempts`),
		"each job's work recorded at least once and at most once an attempt")
	// A job whose result was waiting to be written is not charged for the
	// restart. Those that ran again are the ones the runner held as the
	// server went down (at most twice its workers), and those whose handler
	// was the first to use one of the pool's connections the restart cut.
	retried := db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE attempts > 1")
	require.LessOrEqual(t, retried, int64(2*queue.DefaultWorkers+cl.SQL.Stats().MaxOpenConnections),
		"only the jobs held as the server went down ran again")
	t.Logf("%d of %d jobs ran again after the restart", retried, n)
}
