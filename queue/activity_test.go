package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// finished inserts a job that finished with status at done, due at due
// and started at started (nil: it never started), as the runner would
// leave it: a FAILED job with its last attempt in the history, finished
// when the job did. It returns the job's ID.
func (e *env) finished(t *testing.T, queueName, status string, due time.Time, started *time.Time, done time.Time) int64 {
	t.Helper()
	var id int64
	require.NoError(t, e.db.Gorm.Raw(`INSERT INTO sheaf_jobs (kind, queue, status, attempts, claims, run_at, created_at, started_at, completed_at)
		VALUES ('noop', ?, ?, 1, 1, ?, ?, ?, ?) RETURNING id`, queueName, status, e.db.Time(due), e.db.Time(due),
		e.db.NullTime(started), e.db.Time(done)).Scan(&id).Error)
	if status == "FAILED" {
		require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error)
			VALUES (?, 1, 'r', ?, ?, 'failed', 'boom')`, id, e.db.NullTime(started), e.db.Time(done)).Error)
	}
	return id
}

// ranFor inserts a job of queueName that waited wait, ran for run and
// finished with status at done.
func (e *env) ranFor(t *testing.T, queueName, status string, done time.Time, wait, run time.Duration) {
	t.Helper()
	started := done.Add(-run)
	e.finished(t, queueName, status, started.Add(-wait), &started, done)
}

func TestActivityBucketsAndPercentiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	since := time.Now().Truncate(time.Minute).Add(-10 * time.Minute)
	// The first minute: five completed jobs and one failed, waiting 1 to 6
	// s and running 10 to 60 ms; and a failed job of another queue.
	for i := range 6 {
		status := "COMPLETED"
		if i == 5 {
			status = "FAILED"
		}
		e.ranFor(t, "default", status, since.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Second,
			time.Duration(i+1)*10*time.Millisecond)
	}
	e.ranFor(t, "other", "FAILED", since.Add(59*time.Second), 7*time.Second, 70*time.Millisecond)
	// The third minute: one completed job, one that failed without starting.
	e.ranFor(t, "default", "COMPLETED", since.Add(2*time.Minute), 500*time.Millisecond, 2*time.Second)
	e.finished(t, "default", "FAILED", since.Add(2*time.Minute), nil, since.Add(2*time.Minute+time.Second))
	// Not counted: finished before Since, cancelled, still queued or running.
	e.ranFor(t, "default", "COMPLETED", since.Add(-time.Millisecond), time.Hour, time.Hour)
	e.ranFor(t, "default", "CANCELLED", since.Add(time.Second), time.Hour, time.Hour)
	e.finished(t, "default", "QUEUED", since, nil, since.Add(time.Second))

	got, err := e.client.Activity(ctx, queue.ActivityQuery{Since: since.Add(30 * time.Second), Bucket: time.Minute})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(got), 11) // ten past minutes and this one (the clock may have turned since)
	for i, b := range got {
		require.True(t, b.Start.Equal(since.Add(time.Duration(i)*time.Minute)), "bucket %d starts at %v", i, b.Start)
	}
	// Six values 1..6: the median lies halfway between the 3rd and 4th,
	// the 95th percentile three quarters of the way from the 5th to the
	// 6th (position 0.95·5 = 4.75).
	require.Equal(t, queue.ActivityBucket{Start: got[0].Start, Completed: 5, Failed: 2,
		WaitP50: 4 * time.Second, WaitP95: 6700 * time.Millisecond,
		RunP50: 40 * time.Millisecond, RunP95: 67 * time.Millisecond}, got[0])
	require.Equal(t, queue.ActivityBucket{Start: got[2].Start, Completed: 1, Failed: 1,
		WaitP50: 500 * time.Millisecond, WaitP95: 500 * time.Millisecond,
		RunP50: 2 * time.Second, RunP95: 2 * time.Second}, got[2])
	for i, b := range got {
		if i != 0 && i != 2 {
			require.Equal(t, queue.ActivityBucket{Start: b.Start}, b, "bucket %d", i)
		}
	}

	got, err = e.client.Activity(ctx, queue.ActivityQuery{Since: since, Bucket: time.Minute, Queue: "default"})
	require.NoError(t, err)
	require.Equal(t, queue.ActivityBucket{Start: got[0].Start, Completed: 5, Failed: 1,
		WaitP50: 3500 * time.Millisecond, WaitP95: 5750 * time.Millisecond,
		RunP50: 35 * time.Millisecond, RunP95: 57500 * time.Microsecond}, got[0])

	got, err = e.client.Activity(ctx, queue.ActivityQuery{Since: since, Bucket: time.Hour, Queue: "other"})
	require.NoError(t, err)
	require.Len(t, got, int(time.Since(since.Truncate(time.Hour))/time.Hour)+1)
	var failed int64
	for _, b := range got {
		failed += b.Failed
		require.Zero(t, b.Completed)
	}
	require.Equal(t, int64(1), failed)
}

func TestActivityCountsWhatTheRunnerFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[noop]()))
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error {
			return queue.Permanent(errors.New("no"))
		})))
	})
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	ok, err := e.client.Enqueue(ctx, noop{})
	require.NoError(t, err)
	bad, err := e.client.Enqueue(ctx, report{County: "x"})
	require.NoError(t, err)
	e.runner(t)
	e.waitStatus(t, ok.Job.ID, queue.StatusCompleted)
	e.waitStatus(t, bad.Job.ID, queue.StatusFailed)

	got, err := e.client.Activity(ctx, queue.ActivityQuery{Since: since, Bucket: time.Hour})
	require.NoError(t, err)
	var completed, failed int64
	for _, b := range got {
		completed, failed = completed+b.Completed, failed+b.Failed
		require.GreaterOrEqual(t, b.WaitP95, b.WaitP50)
		require.GreaterOrEqual(t, b.RunP95, b.RunP50)
	}
	require.Equal(t, []int64{1, 1}, []int64{completed, failed})
}

func TestActivityRefusesBadQueries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for name, q := range map[string]queue.ActivityQuery{
		"no bucket":         {Since: time.Now()},
		"negative bucket":   {Since: time.Now(), Bucket: -time.Minute},
		"sub-second bucket": {Since: time.Now(), Bucket: 500 * time.Millisecond},
		"too many buckets":  {Since: time.Now().Add(-25 * time.Hour), Bucket: time.Minute},
		"zero since":        {Bucket: time.Hour},
		"bad queue":         {Since: time.Now(), Bucket: time.Minute, Queue: "a\x00b"},
	} {
		_, err := e.client.Activity(ctx, q)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
	}
	got, err := e.client.Activity(ctx, queue.ActivityQuery{Since: time.Now().Add(-1439 * time.Hour), Bucket: time.Hour})
	require.NoError(t, err, "1439 whole hours ago and this one")
	require.Len(t, got, queue.MaxActivityBuckets)
	got, err = e.client.Activity(ctx, queue.ActivityQuery{Since: time.Now().Add(time.Hour), Bucket: time.Minute})
	require.NoError(t, err)
	require.Empty(t, got, "Since in the future")
}

func TestActivityNotMigrated(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	c, err := queue.NewClient(db.Gorm, queue.NewRegistry(), quiet())
	require.NoError(t, err)
	_, err = c.Activity(context.Background(), queue.ActivityQuery{Since: time.Now().Add(-time.Hour), Bucket: time.Minute})
	require.ErrorIs(t, err, queue.ErrNotMigrated)
}

// Jobs over five hours three days ago are rolled up by the hour and
// pruned; the series by the hour, of every queue and of one, is the same
// before and after, and the roll-ups keep one row per kind and queue, per
// queue and in total.
func TestActivityByTheHourOutlivesPruning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	base := time.Now().Add(-72 * time.Hour).Truncate(time.Hour)
	for h := range 5 {
		at := base.Add(time.Duration(h)*time.Hour + 7*time.Minute)
		for i := range h + 2 {
			e.ranFor(t, "default", "COMPLETED", at.Add(time.Duration(i)*time.Second),
				time.Duration(i+1)*time.Second, time.Duration(h*10+i+1)*time.Millisecond)
		}
		e.ranFor(t, "other", "FAILED", at.Add(30*time.Minute), 3*time.Second, 70*time.Millisecond)
		e.ranFor(t, "other", "CANCELLED", at.Add(31*time.Minute), time.Second, time.Second)
	}
	e.finished(t, "default", "FAILED", base, nil, base.Add(time.Minute)) // rescued before it started
	recent := time.Now().Add(-time.Second)
	e.ranFor(t, "default", "COMPLETED", recent, time.Second, time.Millisecond) // this hour's: kept

	series := func(queueName string) []queue.ActivityBucket {
		got, err := e.client.Activity(ctx, queue.ActivityQuery{Since: base.Add(-time.Hour), Bucket: time.Hour, Queue: queueName})
		require.NoError(t, err)
		return got
	}
	all, other := series(""), series("other")
	// Waits 1, 2 and 3 s, runs 1, 2 and 70 ms; the rescued job has none.
	require.Equal(t, queue.ActivityBucket{Start: all[1].Start, Completed: 2, Failed: 2,
		WaitP50: 2 * time.Second, WaitP95: 2900 * time.Millisecond,
		RunP50: 2 * time.Millisecond, RunP95: 63200 * time.Microsecond}, all[1])
	require.Equal(t, queue.ActivityBucket{Start: other[5].Start, Failed: 1,
		WaitP50: 3 * time.Second, WaitP95: 3 * time.Second, RunP50: 70 * time.Millisecond, RunP95: 70 * time.Millisecond}, other[5])

	var completed, failed int64
	for _, b := range all {
		completed, failed = completed+b.Completed, failed+b.Failed
	}
	require.Equal(t, []int64{2 + 3 + 4 + 5 + 6 + 1, 5 + 1}, []int64{completed, failed})

	client, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithRetention(queue.Retention{
		Completed: queue.MinRetention, Failed: queue.MinRetention, Cancelled: queue.MinRetention}))
	require.NoError(t, err)
	n, err := client.Prune(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5*2+2+3+4+5+6+1, n)
	require.EqualValues(t, 1, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "this hour's job is left")
	require.EqualValues(t, 5*(2+2+1), e.db.Count(t, "SELECT count(*) FROM sheaf_hours"),
		"each hour: noop in default and in other, default, other, and the total")

	for _, c := range []struct {
		queue  string
		before []queue.ActivityBucket
	}{{"", all}, {"other", other}} {
		after := series(c.queue)
		require.GreaterOrEqual(t, len(after), len(c.before)) // the clock may have turned an hour since
		require.Equal(t, c.before, after[:len(c.before)], "queue %q", c.queue)
	}
}
