package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// A paused queue is claimed by no runner while the runners go on polling,
// the job running when it was paused finishes, and its jobs run once it is
// resumed.
func TestPausedQueueIsNotClaimed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if j.Args.County == "block" {
			<-release
		}
		return nil
	}))
	ctx := context.Background()
	poll := queue.WithPollInterval(20 * time.Millisecond)
	r1, r2 := e.runner(t, poll), e.runner(t, poll)
	running := enqueue(t, e, report{County: "block"})
	e.events.Wait(t, queue.EventStarted, running, 1)

	require.NoError(t, e.client.PauseQueue(ctx, queue.DefaultQueue))
	require.NoError(t, e.client.PauseQueue(ctx, queue.DefaultQueue), "pausing twice is harmless")
	queuetest.WaitPolls(t, 2, r1, r2) // both have read the pause by now, notified or not
	var ids []int64
	for range 5 {
		ids = append(ids, enqueue(t, e, noop{}))
	}
	close(release)
	e.events.Wait(t, queue.EventCompleted, running, 1) // the running job finished
	queuetest.WaitPolls(t, 3, r1, r2)
	for _, id := range ids {
		require.Equal(t, queue.StatusQueued, e.status(t, id), "job %d of a paused queue", id)
	}
	require.Equal(t, int64(1), r1.Stats().Claimed+r2.Stats().Claimed, "only the job that ran before the pause")

	qs, err := e.client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.True(t, qs[0].Paused)
	require.NotNil(t, qs[0].PausedAt)
	require.Equal(t, int64(5), qs[0].Counts[queue.StatusQueued])

	require.NoError(t, e.client.ResumeQueue(ctx, queue.DefaultQueue))
	for _, id := range ids {
		e.waitStatus(t, id, queue.StatusCompleted)
	}
	qs, err = e.client.Queues(ctx)
	require.NoError(t, err)
	require.False(t, qs[0].Paused)
	require.Nil(t, qs[0].PausedAt)
}

// Queue names are checked as WithQueues checks them.
func TestPauseQueueChecksTheName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	for _, name := range []string{"", string(make([]byte, 200)), "a\x00b"} {
		require.ErrorIs(t, e.client.PauseQueue(context.Background(), name), queue.ErrInvalidOption)
		require.ErrorIs(t, e.client.ResumeQueue(context.Background(), name), queue.ErrInvalidOption)
	}
}

// Queues lists every queue with jobs or paused, by name, with its counts
// and how long its oldest due job has waited.
func TestQueuesOverview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	enqueue(t, e, noop{}, queue.OnQueue("b"), queue.RunAt(time.Now().Add(-time.Hour)))
	enqueue(t, e, noop{}, queue.OnQueue("b"))
	enqueue(t, e, noop{}, queue.OnQueue("a"), queue.After(time.Hour))
	cancelled := enqueue(t, e, noop{}, queue.OnQueue("a"))
	_, err := e.client.Cancel(ctx, cancelled)
	require.NoError(t, err)
	require.NoError(t, e.client.PauseQueue(ctx, "c"))

	qs, err := e.client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 3)
	require.Equal(t, []string{"a", "b", "c"}, []string{qs[0].Name, qs[1].Name, qs[2].Name})
	require.Equal(t, map[queue.Status]int64{queue.StatusQueued: 1, queue.StatusCancelled: 1}, qs[0].Counts)
	require.Zero(t, qs[0].OldestDue, "a's queued job is not due")
	require.Equal(t, map[queue.Status]int64{queue.StatusQueued: 2}, qs[1].Counts)
	require.InDelta(t, time.Hour.Seconds(), qs[1].OldestDue.Seconds(), 60)
	require.False(t, qs[1].Paused)
	require.Empty(t, qs[2].Counts)
	require.True(t, qs[2].Paused)

	require.NoError(t, e.client.ResumeQueue(ctx, "c"))
	qs, err = e.client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 2, "a resumed queue without jobs is not listed")
}

// Attempts lists a job's attempts, oldest first: those that failed from
// the history, the one that completed from the job.
func TestAttemptsOfARetriedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if j.Attempt <= j.Args.Fail {
			return errors.New("county server down")
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{0}), queue.MaxAttempts(3)))
	ctx := context.Background()
	ok := enqueue(t, e, report{County: "Travis", Fail: 2})
	failed := enqueue(t, e, report{County: "Kent", Fail: 3})
	r := e.runner(t)
	e.waitStatus(t, ok, queue.StatusCompleted)
	e.waitStatus(t, failed, queue.StatusFailed)

	as, err := e.client.Attempts(ctx, ok)
	require.NoError(t, err)
	require.Len(t, as, 3)
	for i, a := range as {
		require.Equal(t, i+1, a.Number)
		require.Equal(t, r.ID(), a.Runner)
		require.NotNil(t, a.FinishedAt)
		require.False(t, a.FinishedAt.Before(a.StartedAt), "attempt %d", a.Number)
	}
	require.Equal(t, []string{queue.OutcomeRetried, queue.OutcomeRetried, queue.OutcomeCompleted},
		[]string{as[0].Outcome, as[1].Outcome, as[2].Outcome})
	require.Equal(t, "county server down", as[0].Error)
	require.Empty(t, as[2].Error)

	as, err = e.client.Attempts(ctx, failed)
	require.NoError(t, err)
	require.Equal(t, []string{queue.OutcomeRetried, queue.OutcomeRetried, queue.OutcomeFailed},
		[]string{as[0].Outcome, as[1].Outcome, as[2].Outcome})
	require.Equal(t, "county server down", as[2].Error)

	_, err = e.client.Attempts(ctx, failed+100)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

// The history keeps the last 20 attempts of a job.
func TestAttemptsKeepsTheLastTwenty(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		return errors.New("again")
	}, queue.RetryBackoff(queue.Delays{0}), queue.MaxAttempts(25)))
	id := enqueue(t, e, report{})
	e.runner(t)
	e.waitStatus(t, id, queue.StatusFailed)
	as, err := e.client.Attempts(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, as, 20)
	require.Equal(t, 6, as[0].Number)
	require.Equal(t, 25, as[19].Number)
	require.Equal(t, queue.OutcomeFailed, as[19].Outcome)
	require.Equal(t, int64(20), e.db.Count(t, "SELECT count(*) FROM sheaf_attempts WHERE job_id = ?", id), "older rows are dropped")
}

// A running attempt is listed as running; cancelled, it is recorded as
// such, and a retry's attempt follows it.
func TestAttemptsOfACancelledJob(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			<-release
		}
		return nil
	}))
	ctx := context.Background()
	id := enqueue(t, e, report{})
	r := e.runner(t)
	e.events.Wait(t, queue.EventStarted, id, 1)
	as, err := e.client.Attempts(ctx, id)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, queue.OutcomeRunning, as[0].Outcome)
	require.Equal(t, r.ID(), as[0].Runner)
	require.Nil(t, as[0].FinishedAt)
	require.False(t, as[0].StartedAt.IsZero())

	_, err = e.client.Cancel(ctx, id)
	require.NoError(t, err)
	close(release)
	e.events.Wait(t, queue.EventCancelled, id, 1)
	_, err = e.client.Retry(ctx, id)
	require.NoError(t, err)
	e.waitStatus(t, id, queue.StatusCompleted)
	as, err = e.client.Attempts(ctx, id)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, queue.OutcomeCancelled, as[0].Outcome)
	require.Equal(t, r.ID(), as[0].Runner)
	require.Equal(t, queue.OutcomeCompleted, as[1].Outcome)
	require.Equal(t, 2, as[1].Number)
}

// Search finds text in args and errors, ignoring case, with LIKE's
// wildcards taken as they are; Newest and BeforeID page from the newest.
func TestListSearchAndNewest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	travis := enqueue(t, e, report{County: "Travis"})
	kent := enqueue(t, e, report{County: "Kent_100%"})
	kentish := enqueue(t, e, report{County: "Kent-1000"})
	broken := enqueue(t, e, noop{})
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET last_error = 'Disk FULL on node 3' WHERE id = ?", broken).Error)

	search := func(text string) []int64 {
		t.Helper()
		jobs, err := e.client.List(ctx, queue.Filter{Search: text})
		require.NoError(t, err)
		ids := []int64{}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		return ids
	}
	require.Equal(t, []int64{travis}, search("TRAVIS"))
	require.Equal(t, []int64{kent}, search("_1"), "_ is not a wildcard")
	require.Equal(t, []int64{kent}, search("0%"), "% is not a wildcard")
	require.Equal(t, []int64{kent, kentish}, search("kent"))
	require.Equal(t, []int64{broken}, search("disk full"))
	require.Empty(t, search(`\`))

	page, err := e.client.List(ctx, queue.Filter{Newest: true, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{broken, kentish, kent}, []int64{page[0].ID, page[1].ID, page[2].ID})
	page, err = e.client.List(ctx, queue.Filter{Newest: true, BeforeID: kent, Limit: 3})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, travis, page[0].ID)

	_, err = e.client.List(ctx, queue.Filter{Search: "a\x00"})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

// CancelMatching cancels every queued and running job a filter selects,
// past a chunk, cancelling running ones on their runner, and leaves the
// others.
func TestCancelMatching(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 1)
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	ctx := context.Background()
	running := enqueue(t, e, report{County: "Travis"}, queue.OnQueue("x"))
	r := e.runner(t, queue.WithQueues("x"))
	e.events.Wait(t, queue.EventStarted, running, 1)

	bulk := make([]queue.Params, 1500)
	for i := range bulk {
		bulk[i] = queue.Params{Args: noop{}, Options: []queue.EnqueueOption{queue.OnQueue("y")}}
	}
	_, err := e.client.EnqueueBulk(ctx, bulk)
	require.NoError(t, err)
	other := enqueue(t, e, report{County: "Kent"}, queue.OnQueue("y"))

	n, err := e.client.CancelMatching(ctx, queue.Filter{Statuses: []queue.Status{queue.StatusCompleted}})
	require.NoError(t, err)
	require.Zero(t, n, "no job of those statuses can be cancelled")

	n, err = e.client.CancelMatching(ctx, queue.Filter{Kinds: []string{"noop"}, Limit: 10, Newest: true})
	require.NoError(t, err)
	require.Equal(t, int64(1500), n, "every match, not a page")
	require.Equal(t, queue.StatusQueued, e.status(t, other))

	n, err = e.client.CancelMatching(ctx, queue.Filter{Search: "travis"})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.ErrorIs(t, <-causes, queue.ErrCancelled)
	e.events.Wait(t, queue.EventCancelled, running, 1)
	require.Equal(t, queue.StatusCancelled, e.status(t, running))
	require.Equal(t, int64(1), r.Stats().Cancelled)
	as, err := e.client.Attempts(ctx, running)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, queue.OutcomeCancelled, as[0].Outcome)

	n, err = e.client.CancelMatching(ctx, queue.Filter{Queue: "y"})
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "only the one left")
	counts, err := e.client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1502), counts.ByStatus[queue.StatusCancelled])
}

// A runner is listed while it runs, seen again at each renewal, and gone
// once it stops.
func TestRunnersAndSchemaVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	v, err := e.client.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, queue.SchemaVersion, v)

	r, err := queue.NewRunner(e.client, queue.WithQueues("a", "b"), queue.WithWorkers(3), queue.WithLease(600*time.Millisecond),
		queue.WithRunnerID("r-1"))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(func() { require.NoError(t, r.Stop(ctx)) })
	rs, err := e.client.Runners(ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, "r-1", rs[0].ID)
	require.Equal(t, []string{"a", "b"}, rs[0].Queues)
	require.Equal(t, 3, rs[0].Workers)
	started, seen := rs[0].StartedAt, rs[0].SeenAt
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // the lease is renewed every 200 ms
	defer tick.Stop()
	for rs[0].SeenAt.Equal(seen) {
		require.True(t, time.Now().Before(deadline), "the runner's row was not renewed")
		<-tick.C
		rs, err = e.client.Runners(ctx, 0)
		require.NoError(t, err)
		require.Len(t, rs, 1)
	}
	require.True(t, rs[0].SeenAt.After(seen))
	require.True(t, rs[0].StartedAt.Equal(started), "renewals keep the start")
	require.NoError(t, r.Stop(ctx))
	rs, err = e.client.Runners(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, rs, "a runner that stops deletes its row")
}

// The audit log keeps what is recorded and reads it newest first, a page
// at a time.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	first, err := e.client.RecordAudit(ctx, queue.AuditEntry{At: at, Actor: "ana", Action: "pause", Target: json.RawMessage(`{"queue":"a"}`), Result: "ok"})
	require.NoError(t, err)
	second, err := e.client.RecordAudit(ctx, queue.AuditEntry{Actor: "bo", Action: "cancel", Result: "ok", Changed: 12})
	require.NoError(t, err)
	third, err := e.client.RecordAudit(ctx, queue.AuditEntry{Actor: "bo", Action: "retry", Target: json.RawMessage(`[1,2]`), Result: "failed"})
	require.NoError(t, err)
	require.Less(t, first, second)
	require.Less(t, second, third)

	page, err := e.client.AuditLog(ctx, 0, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, []int64{third, second}, []int64{page[0].ID, page[1].ID})
	require.Equal(t, int64(12), page[1].Changed)
	require.Nil(t, page[1].Target)
	require.JSONEq(t, `[1,2]`, string(page[0].Target))
	require.WithinDuration(t, time.Now(), page[1].At, time.Minute, "the database's time")
	page, err = e.client.AuditLog(ctx, page[1].ID, 2)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "ana", page[0].Actor)
	require.Equal(t, "pause", page[0].Action)
	require.True(t, at.Equal(page[0].At))
	require.JSONEq(t, `{"queue":"a"}`, string(page[0].Target))

	_, err = e.client.RecordAudit(ctx, queue.AuditEntry{Action: "x", Target: json.RawMessage(`{`)})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = e.client.RecordAudit(ctx, queue.AuditEntry{Actor: "ana"})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = e.client.AuditLog(ctx, 0, 1001)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}
