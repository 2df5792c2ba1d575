package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
)

// TestTxClientWorksInTheCallersTransaction calls every method of a TxClient
// inside a transaction, each on rows that only that transaction can see,
// then rolls it back and finds nothing of what they wrote.
func TestTxClientWorksInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		basic(t)(r)
		require.NoError(t, r.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(2, 0),
			Jobs: func(queue.Tick) []queue.Params { return nil }}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := e.db.Now(t)
	at := func(d time.Duration) any { return e.db.Time(now.Add(d)) }
	lastTick := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, time.UTC).AddDate(0, 0, -1)

	boom := errors.New("the caller's own work failed")
	err := e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		c := e.client.Tx(tx)
		// Jobs: one in a run on queue "txq", completed in 10s after three
		// of its kind that took 1s; one to cancel and retry; one to fail.
		res, err := c.Enqueue(ctx, report{County: "in run"}, queue.OnQueue("txq"), queue.InRun("tx-run"))
		require.NoError(t, err)
		slow := res.Job.ID
		raw, err := c.EnqueueRaw(ctx, "report", json.RawMessage(`{"county":"raw"}`), queue.OnQueue("txq"))
		require.NoError(t, err)
		many, err := c.EnqueueMany(ctx, []queue.Params{{Args: noop{}}, {Args: noop{}}, {Args: noop{}}})
		require.NoError(t, err)
		n, err := c.EnqueueBulk(ctx, []queue.Params{{Args: noop{}}, {Args: noop{}}})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		history := []int64{many[0].Job.ID, many[1].Job.ID, many[2].Job.ID}
		require.NoError(t, tx.Exec("UPDATE sheaf_jobs SET kind = 'report', status = 'COMPLETED', started_at = ?, completed_at = ? WHERE id IN ?",
			at(-time.Hour), at(-time.Hour+time.Second), history).Error)
		require.NoError(t, tx.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED', started_at = ?, completed_at = ? WHERE id = ?",
			at(-time.Minute), at(-time.Minute+10*time.Second), slow).Error)
		require.NoError(t, tx.Exec("INSERT INTO sheaf_schedules (name, last_tick, updated_at) VALUES (?, ?, ?)",
			"nightly", e.db.Time(lastTick), at(0)).Error)

		got, err := c.Get(ctx, raw.Job.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, got.Status)
		list, err := c.List(ctx, queue.Filter{Queue: "txq"})
		require.NoError(t, err)
		require.Len(t, list, 2)
		count, err := c.Count(ctx, queue.Filter{})
		require.NoError(t, err)
		require.Equal(t, int64(7), count)
		stats, err := c.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), stats.ByKind["report"][queue.StatusCompleted])
		require.Equal(t, int64(3), stats.Ready)

		cancelled, err := c.Cancel(ctx, raw.Job.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusCancelled, cancelled.Status)
		retried, err := c.Retry(ctx, raw.Job.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, retried.Status)
		attempts, err := c.Attempts(ctx, slow)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Equal(t, queue.OutcomeCompleted, attempts[0].Outcome)
		children, err := c.Children(ctx, slow)
		require.NoError(t, err)
		require.Empty(t, children)

		require.NoError(t, tx.Exec("UPDATE sheaf_jobs SET status = 'FAILED', completed_at = ? WHERE id = ?", at(0), raw.Job.ID).Error)
		requeued, err := c.RetryFailed(ctx, queue.Filter{Queue: "txq"})
		require.NoError(t, err)
		require.Equal(t, int64(1), requeued)
		matched, err := c.CancelMatching(ctx, queue.Filter{Kinds: []string{"noop"}})
		require.NoError(t, err)
		require.Equal(t, int64(2), matched, "the bulk's two jobs")

		require.NoError(t, c.PauseQueue(ctx, "txq"))
		qs, err := c.Queues(ctx)
		require.NoError(t, err)
		require.Len(t, qs, 2)
		require.Equal(t, "txq", qs[1].Name)
		require.True(t, qs[1].Paused)
		require.Equal(t, int64(1), qs[1].Counts[queue.StatusQueued])
		require.NoError(t, c.ResumeQueue(ctx, "txq"))
		qs, err = c.Queues(ctx)
		require.NoError(t, err)
		require.False(t, qs[1].Paused)
		require.NoError(t, c.PauseQueue(ctx, "txq"), "paused again, for the rollback to undo")

		id, err := c.RecordAudit(ctx, queue.AuditEntry{Actor: "ana", Action: "pause", Result: "ok"})
		require.NoError(t, err)
		log, err := c.AuditLog(ctx, 0, 10)
		require.NoError(t, err)
		require.Len(t, log, 1)
		require.Equal(t, id, log[0].ID)

		runs, err := c.Runs(ctx, queue.RunsQuery{})
		require.NoError(t, err)
		require.Len(t, runs, 1)
		require.Equal(t, "tx-run", runs[0].RunID)
		rv, err := c.Review(ctx, queue.ReviewQuery{RunID: "tx-run"})
		require.NoError(t, err)
		require.Equal(t, int64(1), rv.Total)
		require.Len(t, rv.Slow, 1, "the typical duration is read in the transaction too")
		require.Equal(t, time.Second, rv.Slow[0].Typical)
		states, err := c.ScheduleStates(ctx)
		require.NoError(t, err)
		require.Len(t, states, 1)
		require.True(t, states[0].LastTick.Equal(lastTick), "last tick %v", states[0].LastTick)
		require.Same(t, e.reg, c.Registry())
		return boom
	})
	require.ErrorIs(t, err, boom)

	// The rollback took everything with it.
	count, err := e.client.Count(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Zero(t, count)
	qs, err := e.client.Queues(ctx)
	require.NoError(t, err)
	require.Empty(t, qs, "no job, and no pause")
	log, err := e.client.AuditLog(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, log)
	states, err := e.client.ScheduleStates(ctx)
	require.NoError(t, err)
	require.True(t, states[0].LastTick.IsZero())
}

// TestTxClientWritesAtCommit pauses a queue and records an audit entry in a
// transaction that commits: both are there afterwards.
func TestTxClientWritesAtCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	require.NoError(t, e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		c := e.client.Tx(tx)
		if err := c.PauseQueue(ctx, queue.DefaultQueue); err != nil {
			return err
		}
		_, err := c.RecordAudit(ctx, queue.AuditEntry{Actor: "ana", Action: "pause", Result: "ok"})
		return err
	}))
	qs, err := e.client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.True(t, qs[0].Paused)
	log, err := e.client.AuditLog(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
}
