package queue_test

// Runners cut off from the database by a network partition (a proxy in the
// test process that stops delivering), which, unlike a terminated backend,
// lets a statement the runner gave up on run on the server later, and loses
// replies to statements that ran.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// cutOff is a runner whose connections all go through a proxy.
type cutOff struct {
	proxy  *pgtest.Proxy
	runner *queue.Runner
	logs   *logs
}

// startCutOff starts a runner on e's schema through a proxy, with its own
// pool sized as the multi-runner tests size theirs. Its events go to e's
// observer; its logs, at Info and above, to the returned logs.
func startCutOff(t *testing.T, e *env, opts ...queue.RunnerOption) *cutOff {
	t.Helper()
	p := pgtest.NewProxy(t, e.db)
	db, err := gorm.Open(postgres.Open(p.DSN(e.db.DSN)), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sizePool(sqlDB)
	t.Cleanup(func() { _ = sqlDB.Close() })
	l := newLogs(slog.LevelDebug)
	c, err := queue.NewClient(db, e.reg, l.option(), queue.WithObserver(e.events))
	require.NoError(t, err)
	r, err := queue.NewRunner(c, append([]queue.RunnerOption{queue.WithRunnerID("cut-off"), queue.WithWorkers(testWorkers),
		queue.WithPollInterval(50 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() {
		p.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			// A test's own Stop, cut off, could not put its jobs back, and
			// said so; this one says it again. Any other error is this
			// Stop's own.
			require.ErrorContains(t, err, "the runner was cut short before this Stop")
		}
	})
	return &cutOff{proxy: p, runner: r, logs: l}
}

// A claim the runner gave up on during a partition runs on the server once
// the partition heals. Its job, locked in the runner's name and run by
// nobody, must not wait for its lease to expire, nor lose an attempt: the
// runner puts it back, or claims it again, and it completes on its first
// counted attempt, never rescued.
func TestClaimLostInAPartitionNeitherStrandsNorChargesTheJob(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	e := newEnv(t, basic(t))
	co := startCutOff(t, e, queue.WithLease(3*time.Second))
	co.proxy.Partition()
	id := enqueue(t, e, noop{})
	co.logs.wait(t, "queue: claim failed", 1) // its claim is in flight, and the runner gave up on it
	co.proxy.Heal()
	e.events.Wait(t, queue.EventCompleted, id, 1)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, rec.Attempts)
	require.NotContains(t, e.events.Of(id), queue.EventRescued)
}

// The same, made deterministic: a job that is locked in a runner's name but
// that the runner does not run (as a claim that landed after the runner gave
// up on it leaves it) goes back to the queue at the runner's next lease
// renewal, its attempt uncounted, and is worked.
func TestJobsHeldInARunnersNameThatItDoesNotRunArePutBack(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	e := newEnv(t, basic(t))
	r := e.runner(t, queue.WithRunnerID("owner"), queue.WithLease(time.Second), queue.WithPollInterval(time.Hour))
	id := enqueue(t, e, noop{}, queue.After(time.Hour)) // not claimable: only what the test does below makes it PROCESSING
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'PROCESSING', attempts = 1, claims = 1, run_at = now(),
		locked_by = 'owner', locked_until = now() + interval '1 hour' WHERE id = ?`, id).Error)
	e.events.Wait(t, queue.EventRequeued, id, 1)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, rec.Attempts, "the orphaned claim's attempt was given back")
	require.Equal(t, 2, rec.Claims)
	require.Equal(t, int64(1), r.Stats().Requeued)
}

// A completion that committed, but whose reply the partition lost, is tried
// again; the retry finds the completion there, and it counts as written: the
// job is reported completed, not rejected.
func TestCompletionWhoseReplyWasLostCountsAsWritten(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		<-release
		return nil
	}))
	co := startCutOff(t, e, queue.WithLease(3*time.Second))
	// A first job, so that the runner holds its result connection: a new
	// one could not be opened without replies.
	warm := enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, warm, 1)
	id := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventStarted, id, 1)
	co.proxy.DropReplies()
	close(release)
	e.waitStatus(t, id, queue.StatusCompleted)
	co.logs.wait(t, "queue: bookkeeping statement failed; trying again", 1) // the completer gave up waiting for the reply
	co.proxy.Heal()
	e.events.Wait(t, queue.EventCompleted, id, 1)
	require.NotContains(t, e.events.Of(id), queue.EventRejected)
	require.Zero(t, co.runner.Stats().Rejected)
	require.Equal(t, int64(2), co.runner.Stats().Completed)
}

// A runner cut off for less than its lease keeps its job: the renewal that
// fails is tried again at once and then every fraction of a lease, each try
// bounded by a fraction of the lease, so the lease is renewed soon after the
// partition heals, before it expires. (Renewals a third of a lease apart
// would fail at 3 s and 6 s and try next at 9 s, when it has expired.) A
// second runner stands by to rescue the job if its lease did expire.
func TestLeaseRenewedSoonAfterAPartitionHeals(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		<-release
		return nil
	}))
	// Renewed every 5 s, each try bounded by 1.5 s: the third failure is
	// at about 10 s, which leaves a loaded machine 5 s to renew once the
	// partition heals. No polls, whose failed claims would ask for renewals
	// too.
	co := startCutOff(t, e, queue.WithLease(15*time.Second), queue.WithPollInterval(time.Hour))
	id := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventStarted, id, 1)
	e.runner(t, queue.WithRunnerID("rescuer"), queue.WithRescueInterval(50*time.Millisecond))
	co.proxy.Partition()
	co.logs.wait(t, "queue: lease renewal failed", 3) // the renewal at 5 s, and two more tries
	co.proxy.Heal()
	co.logs.wait(t, "queue: lease renewal works again", 1)
	close(release)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	require.NotContains(t, e.events.Of(id), queue.EventRescued)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, rec.Claims, "worked by the runner that claimed it")
}

// A runner that stops out of time while cut off from the database does not
// keep retrying its bookkeeping for a lease: each write gets one more try,
// and Done is closed soon after. What it could not write is rescued later.
func TestStopOutOfTimeWhileCutOffReturnsAndUnwinds(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	// An 18 s lease: 18 s of retries, were it not stopping, statements
	// bounded at 3 s, and a resignation at 6 s.
	co := startCutOff(t, e, queue.WithLease(18*time.Second))
	id := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventStarted, id, 1)
	co.proxy.Partition()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, co.runner.Stop(ctx), context.DeadlineExceeded)
	select {
	case <-co.runner.Done():
	case <-time.After(14 * time.Second): // one statement timeout for each stage, with room to spare, and less than a lease
		t.Fatal("the runner kept retrying after Stop ran out of time")
	}
	require.Equal(t, queue.StatusProcessing, e.status(t, id), "left for the rescuer")
}
