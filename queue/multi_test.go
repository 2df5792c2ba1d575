package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// ledgerEnv is an env whose registry has the ledger kinds and a ledger table.
func ledgerEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, func(r *queue.Registry) {})
	at := "timestamptz"
	if pgtest.Store() == "mysql" {
		at = "DATETIME(6)"
	}
	require.NoError(t, e.db.Gorm.Exec(`CREATE TABLE ledger (
		job_id bigint NOT NULL, attempt int NOT NULL, at `+at+` NOT NULL DEFAULT CURRENT_TIMESTAMP)`).Error)
	registerLedger(e.db.Gorm, io.Discard)(e.reg)
	return e
}

// keyColumn is the alert episodes' column key in the run's SQL: a
// reserved word on MariaDB.
func keyColumn() string {
	if pgtest.Store() == "mysql" {
		return "`key`"
	}
	return "key"
}

// ownPool opens a connection pool of its own on the env's schema, as another
// process would have, sized as a deployment would size it: the server
// allows 100 connections, shared by every test running in parallel.
func ownPool(t *testing.T, e *env) *gorm.DB {
	t.Helper()
	db, err := pgtest.OpenDSN(e.db.DSN)
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sizePool(sqlDB)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return db
}

// Each multi-runner test's runner works this many jobs at once, and its pool
// holds this many connections: four for the runner, the rest for handlers.
const (
	testWorkers  = 4
	testPoolSize = 8
)

func sizePool(db *sql.DB) {
	db.SetMaxOpenConns(testPoolSize)
	db.SetMaxIdleConns(testPoolSize)
}

func enqueueLedger(t *testing.T, e *env, n int) {
	t.Helper()
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: ledgerJob{N: i}}
	}
	got, err := e.client.EnqueueBulk(context.Background(), jobs)
	require.NoError(t, err)
	require.Equal(t, int64(n), got)
}

// requireExactlyOnce checks that every job completed once and was worked once.
func requireExactlyOnce(t *testing.T, e *env, n int) {
	t.Helper()
	require.Equal(t, int64(n), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'COMPLETED' AND attempts = 1"))
	require.Equal(t, int64(n), e.db.Count(t, "SELECT count(*) FROM ledger"), "every job's work recorded")
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM (SELECT job_id FROM ledger GROUP BY job_id HAVING count(*) > 1) d"), "no job worked twice")
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs j WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id = j.id)"), "none lost")
}

// Four runners, each with its own connection pool, share 1,200 jobs.
func TestRunnersWithSeparatePoolsShareTheWork(t *testing.T) {
	t.Parallel()
	const n = 1_200
	e := ledgerEnv(t)
	enqueueLedger(t, e, n)
	var runners []*queue.Runner
	for i := range 4 {
		c, err := queue.NewClient(ownPool(t, e), e.reg, quiet(), queue.WithObserver(e.events))
		require.NoError(t, err)
		r, err := queue.NewRunner(c, queue.WithRunnerID(fmt.Sprint("pool-", i)), queue.WithWorkers(testWorkers))
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		runners = append(runners, r)
	}
	e.events.Wait(t, queue.EventCompleted, 0, n)
	var total int64
	for _, r := range runners {
		require.NoError(t, r.Stop(context.Background()))
		s := r.Stats()
		require.Positive(t, s.Completed, "every runner took part")
		require.Zero(t, s.Rejected)
		total += s.Completed
	}
	require.Equal(t, int64(n), total)
	requireExactlyOnce(t, e, n)
}

// Two runner processes and one in this process share 1,000 jobs.
func TestRunnersInSeparateProcesses(t *testing.T) {
	t.Parallel()
	const n = 1_000
	e := ledgerEnv(t)
	a := startChild(t, e.db.DSN, "proc-a", 30*time.Second, e.events)
	b := startChild(t, e.db.DSN, "proc-b", 30*time.Second, e.events)
	enqueueLedger(t, e, n)
	parent := e.runner(t, queue.WithRunnerID("proc-parent"), queue.WithWorkers(testWorkers))
	e.events.Wait(t, queue.EventCompleted, 0, n) // the children's completions arrive on their stdout
	a.stop(t)
	b.stop(t)
	requireExactlyOnce(t, e, n)
	require.Positive(t, a.completed.Load(), "process a took part")
	require.Positive(t, b.completed.Load(), "process b took part")
	require.Positive(t, parent.Stats().Completed, "this process took part")
	require.Equal(t, int64(n), a.completed.Load()+b.completed.Load()+parent.Stats().Completed)
}

// kill -9 of the process running a job: the job is rescued after its lease
// and completes exactly once elsewhere.
func TestKilledProcessJobIsRescued(t *testing.T) {
	t.Parallel()
	e := ledgerEnv(t)
	victim := startChild(t, e.db.DSN, "victim", time.Second, nil)
	id := enqueue(t, e, hangJob{})
	victim.expect(t, fmt.Sprintf("started %d 1", id))
	victim.kill(t)
	require.Equal(t, queue.StatusProcessing, e.status(t, id), "the dead process still holds it")

	rescuer := e.runner(t, queue.WithRescueInterval(100*time.Millisecond))
	rescued := e.events.Wait(t, queue.EventRescued, id, 1)[0]
	require.Zero(t, rescued.Attempt, "the attempt the dead process held is given back")
	e.events.Wait(t, queue.EventCompleted, id, 1)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, 2, rec.Claims)
	require.Contains(t, *rec.LastError, "lease expired: runner victim did not renew it in time")
	require.Contains(t, *rec.LastError, "rescued by runner "+rescuer.ID())
	require.NotContains(t, *rec.LastError, "crash")
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM ledger WHERE job_id = ?", id), "completed exactly once")
}

// A job that kills its process on every attempt still runs out of attempts.
// Its first death is not counted (a dead process does not say which of its
// jobs killed it); from then on it is a suspect, and each attempt counts as
// it starts.
func TestJobThatKillsItsProcessEveryTimeFails(t *testing.T) {
	t.Parallel()
	e := ledgerEnv(t)
	id := enqueue(t, e, suicideJob{}, queue.MaxAttempts(3))
	for death := 1; death <= 4; death++ {
		c := startChild(t, e.db.DSN, fmt.Sprint("doomed-", death), 500*time.Millisecond, nil)
		c.expect(t, "dying")
		_ = c.cmd.Wait() // it killed itself
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		// Each death after the first counts an attempt. Claims count at
		// least the deaths: a loaded child may also put a claim back
		// uncounted (see Requeued).
		require.Equal(t, max(death-1, 1), rec.Attempts, "death %d: %+v", death, rec)
		require.GreaterOrEqual(t, rec.Claims, death, "death %d: %+v", death, rec)
	}
	// No process will try a fifth time: the next rescue fails it.
	e.runner(t, queue.WithRescueInterval(100*time.Millisecond))
	ev := e.events.Wait(t, queue.EventRescued, id, 1)[0]
	require.Equal(t, 3, ev.Attempt)
	dead := e.events.Wait(t, queue.EventFailed, id, 1)[0]
	require.ErrorIs(t, dead.Err, queue.ErrLeaseLost, "dead-letter observers hear of it")
	require.ErrorContains(t, dead.Err, "lease expired: runner doomed-4")
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, rec.Status)
	require.Equal(t, 3, rec.Attempts)
	require.Contains(t, *rec.LastError, "lease expired")
}
