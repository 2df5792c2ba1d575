package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// registerReport registers a report handler built by work.
func registerReport(t *testing.T, work func(ctx context.Context, j *queue.Job[report]) error, opts ...queue.RegisterOption) func(*queue.Registry) {
	return func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[report](work), opts...))
		require.NoError(t, queue.Register(r, nopHandler[noop]()))
	}
}

func enqueue(t *testing.T, e *env, args queue.Args, opts ...queue.EnqueueOption) int64 {
	t.Helper()
	res, err := e.client.Enqueue(context.Background(), args, opts...)
	require.NoError(t, err)
	return res.Job.ID
}

func TestJobRunsAndCompletes(t *testing.T) {
	t.Parallel()
	var got *queue.Job[report]
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		got = j
		return j.SetProgress(ctx, 3, 3)
	}))
	id := enqueue(t, e, report{County: "Travis"}, queue.CorrelationID("req-1"), queue.AuthContext(queue.Auth{"role": "ADMIN"}))
	r := e.runner(t)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	require.Equal(t, report{County: "Travis"}, got.Args)
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, "req-1", got.CorrelationID)
	require.Equal(t, queue.Auth{"role": "ADMIN"}, got.Auth, "the handler gets the submitter's claims")
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, int64(3), rec.Processed)
	require.Equal(t, int64(3), *rec.Total)
	require.Nil(t, rec.LockedUntil)
	require.Equal(t, r.ID(), *rec.LockedBy, "the runner that completed it")
	require.False(t, rec.StartedAt.Before(rec.CreatedAt))
	require.False(t, rec.CompletedAt.Before(*rec.StartedAt))
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventCompleted}, e.events.Of(id))
}

func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	e := newEnv(t, registerReport(t, func(_ context.Context, j *queue.Job[report]) error {
		mu.Lock()
		order = append(order, j.Args.County)
		mu.Unlock()
		return nil
	}))
	for _, p := range []struct {
		name string
		prio int
	}{{"low-1", 2}, {"high", 9}, {"mid", 5}, {"low-2", 2}, {"top", 10}} {
		enqueue(t, e, report{County: p.name}, queue.Priority(p.prio))
	}
	e.runner(t, queue.WithWorkers(1))
	e.events.Wait(t, queue.EventCompleted, 0, 5)
	require.Equal(t, []string{"top", "high", "mid", "low-1", "low-2"}, order, "priority first, then age")
}

func TestRunAtIsRespected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	later := enqueue(t, e, noop{}, queue.After(time.Hour))
	past := enqueue(t, e, noop{}, queue.RunAt(time.Now().Add(-time.Minute)))
	soon := enqueue(t, e, noop{}, queue.After(300*time.Millisecond))
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, past, 1)
	e.events.Wait(t, queue.EventCompleted, soon, 1)
	require.Equal(t, queue.StatusQueued, e.status(t, later))
	require.Equal(t, int64(1), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE id = ? AND attempts = 0`, later))
	// The delayed job started no earlier than its run time, by the database's clock.
	rec, err := e.client.Get(context.Background(), soon)
	require.NoError(t, err)
	require.NotNil(t, rec.StartedAt)
	require.False(t, rec.StartedAt.Before(rec.RunAt), "started at %v, to run at %v", rec.StartedAt, rec.RunAt)
	require.GreaterOrEqual(t, rec.RunAt.Sub(rec.CreatedAt), 300*time.Millisecond)
}

func TestRetryWithBackoffOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			return errors.New("transient: connection reset")
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{5 * time.Second})))
	id := enqueue(t, e, report{})
	before := e.db.Now(t)
	e.runner(t)
	ev := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.Equal(t, 5*time.Second, ev.RetryIn)
	require.EqualError(t, ev.Err, "transient: connection reset")
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, "transient: connection reset", *rec.LastError)
	// run_at is five seconds after the failure on the database's clock,
	// which came between before and now.
	now := e.db.Now(t)
	require.False(t, rec.RunAt.Before(before.Add(5*time.Second)), "run at %v, before %v", rec.RunAt, before)
	require.False(t, rec.RunAt.After(now.Add(5*time.Second)), "run at %v, now %v", rec.RunAt, now)
	// Bring the retry forward instead of waiting for it.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET run_at = ? WHERE id = ?", e.db.Time(e.db.Now(t)), id).Error)
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, queue.StatusCompleted, e.status(t, id))
}

func TestLastAttemptFailsIntoTheDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(_ context.Context, j *queue.Job[report]) error {
		return fmt.Errorf("attempt %d failed", j.Attempt)
	}, queue.MaxAttempts(3), queue.RetryBackoff(queue.Delays{0})))
	id := enqueue(t, e, report{})
	e.runner(t)
	failed := e.events.Wait(t, queue.EventFailed, id, 1)[0]
	require.Equal(t, 3, failed.Attempt)
	require.Len(t, e.events.Wait(t, queue.EventRetrying, id, 2), 2)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, rec.Status)
	require.Equal(t, 3, rec.Attempts)
	require.Equal(t, "attempt 3 failed", *rec.LastError)
	require.NotNil(t, rec.CompletedAt)
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		return queue.Permanent(errors.New("county does not exist"))
	}, queue.MaxAttempts(5)))
	id := enqueue(t, e, report{County: "Atlantis"})
	e.runner(t)
	ev := e.events.Wait(t, queue.EventFailed, id, 1)[0]
	require.True(t, queue.IsPermanent(ev.Err))
	require.Equal(t, 1, ev.Attempt)
	require.Equal(t, int64(1), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE id = ?
		AND status = 'FAILED' AND attempts = 1 AND last_error = 'permanent: county does not exist'`, id))
	require.Nil(t, queue.Permanent(nil))
}

func TestPayloadThatDoesNotDecodeFailsPermanently(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error { return nil }, queue.MaxAttempts(5)))
	require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_jobs (kind, payload) VALUES ('report', '{"county": 42}')`).Error)
	e.runner(t)
	ev := e.events.Wait(t, queue.EventFailed, 0, 1)[0]
	require.ErrorIs(t, ev.Err, queue.ErrInvalidPayload)
	require.Equal(t, 1, ev.Attempt, "no point retrying")
}

func TestPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			panic("nil map in report writer")
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{0})))
	id := enqueue(t, e, report{})
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	retry := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.ErrorContains(t, retry.Err, "panic: nil map in report writer")
	require.Equal(t, int64(1), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE id = ? AND attempts = 2
		AND last_error LIKE 'panic: nil map%'`, id), "the error of the failed attempt is kept")
}

func TestKindTimeout(t *testing.T) {
	t.Parallel()
	var cause error
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	}, queue.Timeout(100*time.Millisecond), queue.MaxAttempts(1)))
	id := enqueue(t, e, report{})
	e.runner(t)
	ev := e.events.Wait(t, queue.EventFailed, id, 1)[0]
	require.ErrorIs(t, cause, queue.ErrTimeout)
	require.ErrorIs(t, ev.Err, queue.ErrTimeout)
	require.GreaterOrEqual(t, ev.Duration, 100*time.Millisecond)
}

func TestKindTheRunnerDoesNotKnow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_jobs (kind, max_attempts) VALUES ('ghost', 1)`).Error)
	e.runner(t)
	ev := e.events.Wait(t, queue.EventFailed, 0, 1)[0]
	require.ErrorIs(t, ev.Err, queue.ErrUnknownKind)
	require.Equal(t, "ghost", ev.Kind)
}

func TestCancelARunningJob(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	causes := make(chan error, 1)
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // whatever it returns now is ignored
	}))
	id := enqueue(t, e, report{})
	e.runner(t)
	<-started
	rec, err := e.client.Cancel(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCancelled, rec.Status)
	require.ErrorIs(t, <-causes, queue.ErrCancelled, "the handler learns why")
	ev := e.events.Wait(t, queue.EventCancelled, id, 1)[0]
	require.Equal(t, 1, ev.Attempt)
	require.Equal(t, queue.StatusCancelled, e.status(t, id), "the handler's nil did not complete it")
}

// A result that arrives after the job was rescued and finished by another
// runner changes nothing.
func TestLateResultAfterRescueIsRejected(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			<-release // the first attempt hangs, deaf to its context
			return nil
		}
		return nil
	}))
	id := enqueue(t, e, report{})
	// Runner A does not lead the maintenance, which runner B, rescuing
	// every 20 ms, then does.
	a := e.runner(t, queue.WithRunnerID("runner-a"), queue.WithLease(time.Hour), queue.WithoutMaintenance())
	e.events.Wait(t, queue.EventStarted, id, 1)
	// Its lease expires (runner A is hung) and runner B rescues and runs it.
	e.expireLease(t, id)
	e.runner(t, queue.WithRunnerID("runner-b"), queue.WithRescueInterval(20*time.Millisecond))
	e.events.Wait(t, queue.EventRescued, id, 1)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	close(release) // runner A's first attempt finally returns
	rejected := e.events.Wait(t, queue.EventRejected, id, 1)[0]
	require.Equal(t, 1, rejected.Attempt)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, 2, rec.Claims, "completed once, by the second claim")
	require.Equal(t, 1, rec.Attempts, "the rescue gave the lost attempt back")
	require.Zero(t, rec.Rescues, "a finished attempt clears the suspicion")
	require.Equal(t, int64(1), a.Stats().Rejected)
	// The history has the rescued attempt, with the runner that lost it.
	as, err := e.client.Attempts(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, queue.OutcomeRescued, as[0].Outcome)
	require.Equal(t, "runner-a", as[0].Runner)
	require.Contains(t, as[0].Error, "lease expired")
	require.Equal(t, queue.OutcomeCompleted, as[1].Outcome)
	require.Equal(t, *rec.LockedBy, as[1].Runner)
}

// The same, when the rescued job is claimed again by the runner whose
// attempt hangs: two attempts of one job run side by side on one runner.
func TestLateResultOnTheSameRunnerIsRejected(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	}))
	id := enqueue(t, e, report{})
	e.runner(t, queue.WithRescueInterval(20*time.Millisecond), queue.WithLease(time.Hour))
	e.events.Wait(t, queue.EventStarted, id, 1)
	e.expireLease(t, id)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	close(release)
	e.events.Wait(t, queue.EventRejected, id, 1)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE id = ? AND status = 'COMPLETED' AND claims = 2 AND attempts = 1", id))
}

// A cancellation the runner did not hear about (made in SQL, without the
// notification) still wins: the handler's result is rejected.
func TestLateResultAfterCancelIsRejected(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		<-release
		return nil
	}))
	id := enqueue(t, e, report{})
	e.runner(t)
	e.events.Wait(t, queue.EventStarted, id, 1)
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'CANCELLED', completed_at = ? WHERE id = ?", e.db.Time(e.db.Now(t)), id).Error)
	close(release)
	e.events.Wait(t, queue.EventRejected, id, 1)
	require.Equal(t, queue.StatusCancelled, e.status(t, id))
}

// The job's own database connection is terminated mid-job: the attempt
// fails, and the retry succeeds.
func TestBackendTerminatedMidJob(t *testing.T) {
	pgtest.PostgresOnly(t, "it terminates server backends")
	t.Parallel()
	var calls atomic.Int32
	var e *env
	e = newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			// A long query, which the test kills from outside.
			return e.db.Gorm.WithContext(ctx).Exec("SELECT pg_sleep(60) /* sheaf-test-victim-" + j.Args.County + " */").Error
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{0})))
	id := enqueue(t, e, report{County: e.db.Schema})
	e.runner(t)
	e.events.Wait(t, queue.EventStarted, id, 1)
	var killed int64
	for killed == 0 { // the query may not have reached the server yet; look again in 5 ms
		require.NoError(t, e.db.Gorm.Raw(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity, pg_sleep(0.005)
			WHERE query LIKE '%sheaf-test-victim-' || ? || '%' AND pid <> pg_backend_pid()`, e.db.Schema).Scan(&killed).Error)
	}
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 2, done.Attempt)
	retry := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.ErrorContains(t, retry.Err, "terminat")
}

// A handler that calls runtime.Goexit (as a test's require does) ends its
// worker goroutine; its attempt still finishes, and the runner carries on.
func TestHandlerGoexit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{0})))
	id := enqueue(t, e, report{})
	r := e.runner(t, queue.WithWorkers(1))
	retry := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.ErrorContains(t, retry.Err, "runtime.Goexit")
	e.events.Wait(t, queue.EventCompleted, id, 1)
	other := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventCompleted, other, 1) // the one worker was replaced
	require.Zero(t, r.Stats().Running)
}

// Notifications are database-wide; a queue in another schema of the same
// database must neither cancel nor wake this one's jobs.
func TestOtherSchemasDoNotCancelOurJobs(t *testing.T) {
	pgtest.PostgresOnly(t, "schemas and NOTIFY scoping are PostgreSQL's")
	t.Parallel()
	started := make(chan int64, 1)
	release := make(chan struct{})
	var causes []error
	var mu sync.Mutex
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		started <- j.ID
		select {
		case <-release:
		case <-ctx.Done():
			mu.Lock()
			causes = append(causes, context.Cause(ctx))
			mu.Unlock()
		}
		return nil
	}))
	other := newEnv(t, basic(t))
	id := enqueue(t, e, report{})
	e.runner(t)
	<-started
	// The same job ID in the other schema, cancelled while running there.
	otherID := enqueue(t, other, report{})
	require.Equal(t, id, otherID, "both schemas number their jobs from 1")
	require.NoError(t, other.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'PROCESSING' WHERE id = ?", otherID).Error)
	_, err := other.client.Cancel(context.Background(), otherID)
	require.NoError(t, err)
	// Our own cancellation of another job goes through the same channel and
	// must arrive; once it has, the other schema's came before it.
	probe := enqueue(t, e, report{})
	require.Equal(t, probe, <-started)
	_, err = e.client.Cancel(context.Background(), probe)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventCancelled, probe, 1)
	close(release)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, causes, 1, "only our own cancellation reached a handler")
}

// A retry is picked up when its backoff ends, not at the next poll.
func TestRetryWakesTheRunnerWhenDue(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		if calls.Add(1) == 1 {
			return errors.New("transient")
		}
		return nil
	}, queue.RetryBackoff(queue.Delays{100 * time.Millisecond})))
	id := enqueue(t, e, report{})
	r, err := queue.NewRunner(e.client, queue.WithPollInterval(time.Hour)) // polling would take an hour
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, int64(1), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE id = ? AND last_error = 'transient'
		AND status = 'COMPLETED'`, id), "the last error is kept after success")
}

// The runner's own connections (claims, results, listener) are terminated
// by the server: it reconnects and goes on, and no job is left behind.
func TestRunnerSurvivesItsConnectionsBeingTerminated(t *testing.T) {
	pgtest.PostgresOnly(t, "it terminates server backends")
	t.Parallel()
	e := newEnv(t, basic(t))
	app := "sheaf-victim-" + e.db.Schema
	// The pool's own label replaces the schema's (pgtest labels every
	// connection of the schema), so that only its backends are terminated.
	dsn, err := url.Parse(e.db.DSN)
	require.NoError(t, err)
	q := dsn.Query()
	q.Set("application_name", app)
	dsn.RawQuery = q.Encode()
	pool, err := gorm.Open(postgres.Open(dsn.String()), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	sqlDB, err := pool.DB()
	require.NoError(t, err)
	sizePool(sqlDB)
	t.Cleanup(func() { _ = sqlDB.Close() })
	c, err := queue.NewClient(pool, e.reg, quiet(), queue.WithObserver(e.events))
	require.NoError(t, err)
	r, err := queue.NewRunner(c, queue.WithPollInterval(50*time.Millisecond), queue.WithWorkers(testWorkers))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })

	first := enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, first, 1) // the runner holds its claim and result connections now
	for e.db.Count(t, "SELECT count(*) FROM pg_stat_activity, pg_sleep(0.005) WHERE application_name = $1 AND query LIKE 'LISTEN%'", app) == 0 {
	} // and its listener is listening
	killed := e.db.Count(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app)
	require.GreaterOrEqual(t, killed, int64(3), "the claim, result and listener connections at least")

	for range 20 {
		enqueue(t, e, noop{})
	}
	e.events.Wait(t, queue.EventCompleted, 0, 21)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status <> 'COMPLETED'"))
	require.Equal(t, int64(21), r.Stats().Completed)
}
