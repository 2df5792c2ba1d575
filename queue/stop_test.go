package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

func TestStopWaitsForRunningJobs(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		close(started)
		<-release
		return nil
	}))
	id := enqueue(t, e, report{})
	r, err := queue.NewRunner(e.client)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a job was running")
	case <-time.After(50 * time.Millisecond): // long enough to have seen a premature return
	}
	close(release)
	require.NoError(t, <-stopped)
	require.Equal(t, queue.StatusCompleted, e.status(t, id), "its result was written before Stop returned")
	require.NoError(t, r.Stop(context.Background()), "idempotent")
	require.ErrorIs(t, r.Start(context.Background()), queue.ErrStarted)
}

// When Stop runs out of time, running jobs go back to the queue without
// their attempt counting, and their handlers learn why; they are back by
// the time Stop returns, before its deadline.
func TestStopOutOfTimeRequeuesWithoutBurningAnAttempt(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	causes := make(chan error, 1)
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	id := enqueue(t, e, report{})
	r, err := queue.NewRunner(e.client)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-started
	stopOutOfTime(t, r, stopDeadline)
	requirePutBack(t, e, id)
	require.ErrorIs(t, <-causes, queue.ErrStopping)
	<-r.Done()
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventRequeued}, e.events.Of(id))
	require.Equal(t, int64(1), r.Stats().Requeued)
}

// Stop while jobs keep arriving: afterwards no job is left PROCESSING, and
// every job is either finished or back in the queue.
func TestStopUnderContinuousEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		select {
		case <-time.After(3 * time.Millisecond): // a little real work
		case <-ctx.Done():
		}
		return ctx.Err()
	}))
	r, err := queue.NewRunner(e.client, queue.WithWorkers(8), queue.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	stopProducer := make(chan struct{})
	var produced atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stopProducer:
				return
			default:
			}
			if _, err := e.client.Enqueue(context.Background(), report{}); err != nil {
				t.Error(err)
				return
			}
			produced.Add(1)
		}
	})
	e.events.Wait(t, queue.EventCompleted, 0, 50) // it is busy
	// A context cancelled without a deadline: Stop puts back at once what
	// runs or waits, and returns once it has.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = r.Stop(ctx)
	if err != nil {
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "put them back in the queue")
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'PROCESSING'"), "nothing left PROCESSING when Stop returns")
	close(stopProducer)
	wg.Wait()
	<-r.Done()
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'PROCESSING'"))
	require.Equal(t, produced.Load(), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status IN ('COMPLETED', 'QUEUED')"))
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED' AND attempts > 0"),
		"requeued jobs kept their attempt count at zero")
}

// stopDeadline is the deadline the tests that stop out of time give Stop:
// its margin is 1.2 s, of which the cut has 900 ms to put the jobs back
// and 300 ms to return, room a loaded machine needs.
const stopDeadline = 6 * time.Second

// stopOutOfTime stops r with a deadline d away, while jobs run that take
// longer, and requires that Stop returned before its deadline, saying
// that it put them back.
func stopOutOfTime(t *testing.T, r *queue.Runner, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := r.Stop(ctx)
	require.True(t, time.Now().Before(deadline), "Stop returned before its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "put them back in the queue")
	require.NotContains(t, err.Error(), "could not", "Stop put them back")
}

// requirePutBack requires that the jobs ids are back in the queue after
// one claim, as Stop puts them back: their attempt uncounted, not suspects.
func requirePutBack(t *testing.T, e *env, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, rec.Status, "job %d is back in the queue", id)
		require.Zero(t, rec.Attempts, "job %d: the interrupted attempt does not count", id)
		require.Zero(t, rec.Rescues, "job %d: not a suspect", id)
		require.Equal(t, 1, rec.Claims, "job %d", id)
		require.Nil(t, rec.LockedBy, "job %d", id)
	}
}

func TestRunnerOptionsAreChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	for name, opt := range map[string]queue.RunnerOption{
		"workers":  queue.WithWorkers(0),
		"queues":   queue.WithQueues(),
		"empty q":  queue.WithQueues(""),
		"poll":     queue.WithPollInterval(time.Millisecond),
		"lease":    queue.WithLease(time.Millisecond),
		"rescue":   queue.WithRescueInterval(0),
		"runnerID": queue.WithRunnerID(""),
		"nil":      nil,
	} {
		_, err := queue.NewRunner(e.client, opt)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
	}
	_, err := queue.NewRunner(nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	e.db.SQL.SetMaxOpenConns(3)
	_, err = queue.NewRunner(e.client)
	require.ErrorContains(t, err, "needs at least 4")
	e.db.SQL.SetMaxOpenConns(0)
	r, err := queue.NewRunner(e.client, queue.WithRunnerID("me"))
	require.NoError(t, err)
	require.Equal(t, "me", r.ID())
	require.NoError(t, r.Stop(context.Background()), "stopping a runner never started")
}

// Job logs carry the job's ID, kind, attempt and correlation ID, and never
// its payload or auth context.
func TestJobLogs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		return queue.Permanent(context.DeadlineExceeded)
	}))
	c, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithLogger(logger), queue.WithObserver(e.events))
	require.NoError(t, err)
	res, err := c.Enqueue(context.Background(), report{County: "SECRET-COUNTY"},
		queue.CorrelationID("corr-77"), queue.AuthContext(queue.Auth{"token": "SECRET-TOKEN"}))
	require.NoError(t, err)
	r, err := queue.NewRunner(c)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	e.events.Wait(t, queue.EventFailed, res.Job.ID, 1)
	require.NoError(t, r.Stop(context.Background()))
	mu.Lock()
	logs := buf.String()
	mu.Unlock()
	require.Contains(t, logs, `"msg":"queue: job failed for good"`)
	require.Contains(t, logs, `"correlation_id":"corr-77"`)
	require.Contains(t, logs, `"kind":"report"`)
	require.NotContains(t, logs, "SECRET-TOKEN")
	require.NotContains(t, logs, "SECRET-COUNTY")
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// A runner whose jobs have been short claims more than its workers, ahead of
// need. When its workers then get stuck on slow jobs, the jobs claimed ahead
// go back to the queue, for another runner to work, instead of waiting.
func TestJobsClaimedAheadGoBackWhenTheWorkersAreStuck(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		<-release // slow: holds its worker until the test lets go
		return nil
	}))
	a := e.runner(t, queue.WithWorkers(2))
	short := make([]queue.Params, 200)
	for i := range short {
		short[i] = queue.Params{Args: noop{}}
	}
	_, err := e.client.EnqueueMany(context.Background(), short)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventCompleted, 0, 200) // A has learnt that jobs are short

	// Two slow jobs and four short ones, in one statement: A claims the
	// slow two for its workers and two short ones ahead of need, or, when
	// its round trips to the server have been slow (a loaded machine), up
	// to all four.
	batch := []queue.Params{{Args: report{County: "slow-1"}}, {Args: report{County: "slow-2"}}}
	for range 4 {
		batch = append(batch, queue.Params{Args: noop{}})
	}
	res, err := e.client.EnqueueMany(context.Background(), batch)
	require.NoError(t, err)
	for _, r := range res[:2] {
		e.events.Wait(t, queue.EventStarted, r.Job.ID, 1)
	}
	requeued := e.events.Wait(t, queue.EventRequeued, 0, 2)
	n := a.Stats().Requeued
	require.True(t, n >= 2 && n <= 4, "requeued %d", n)
	for _, ev := range requeued {
		require.Equal(t, "noop", ev.Kind, "only jobs that never started go back")
	}

	b := e.runner(t)
	for _, r := range res[2:] {
		e.events.Wait(t, queue.EventCompleted, r.Job.ID, 1)
	}
	require.Equal(t, int64(4), b.Stats().Completed, "B worked the short jobs while A's workers were stuck")
	for _, ev := range requeued {
		rec, err := e.client.Get(context.Background(), ev.JobID)
		require.NoError(t, err)
		require.Equal(t, 1, rec.Attempts, "going back did not count an attempt")
	}
	close(release)
	for _, r := range res[:2] {
		e.events.Wait(t, queue.EventCompleted, r.Job.ID, 1)
	}
}

// When Stop runs out of time it does not wait for handlers that ignore
// their cancellation: their jobs are back in the queue when it returns, and
// whatever those handlers do afterwards is refused. SetProgress and
// SetOutput return ErrLeaseLost, even once another runner holds the job
// PROCESSING under a later claim; their result is dropped; the job
// completes once, by the later claim. Done waits for the handlers.
func TestStopDoesNotWaitForHandlersThatIgnoreCancellation(t *testing.T) {
	t.Parallel()
	stubbornStarted, politeStarted, laterStarted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	goStale, finishLater := make(chan struct{}), make(chan struct{})
	staleErrs := make(chan error, 2)
	var stubbornRuns atomic.Int64
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if j.Args.County == "polite" {
			close(politeStarted)
			<-ctx.Done()
			return ctx.Err()
		}
		if stubbornRuns.Add(1) > 1 { // the later claim, on runner B
			close(laterStarted)
			<-finishLater
			return j.SetOutput(ctx, "later")
		}
		close(stubbornStarted)
		<-goStale // ignores its context
		staleErrs <- j.SetProgress(ctx, 1, 2)
		staleErrs <- j.SetOutput(ctx, "stale")
		return nil // a success the runner must not write
	}))
	polite := enqueue(t, e, report{County: "polite"})
	stubborn := enqueue(t, e, report{County: "stubborn"})
	a, err := queue.NewRunner(e.client, queue.WithRunnerID("a"))
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	<-politeStarted
	<-stubbornStarted

	stopOutOfTime(t, a, stopDeadline) // whatever the handlers do
	requirePutBack(t, e, polite, stubborn)
	select {
	case <-a.Done():
		t.Fatal("Done closed while a handler still runs")
	default:
	}

	// Another runner claims the stubborn job again while A's handler still
	// runs, and holds it PROCESSING under claim 2.
	b := e.runner(t, queue.WithRunnerID("b"))
	<-laterStarted
	close(goStale)
	require.ErrorIs(t, <-staleErrs, queue.ErrLeaseLost, "SetProgress from the handler Stop cut short")
	require.ErrorIs(t, <-staleErrs, queue.ErrLeaseLost, "SetOutput from the handler Stop cut short")
	<-a.Done()
	rec, err := e.client.Get(context.Background(), stubborn)
	require.NoError(t, err)
	require.Equal(t, queue.StatusProcessing, rec.Status, "A's late success was not written")
	require.Equal(t, 2, rec.Claims)
	require.Equal(t, "b", *rec.LockedBy)
	require.Zero(t, rec.Processed, "A's late progress was not written")
	require.Nil(t, rec.Output, "A's late output was not written")

	close(finishLater)
	e.events.Wait(t, queue.EventCompleted, stubborn, 1)
	rec, err = e.client.Get(context.Background(), stubborn)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts, "completed once, by its only counted attempt")
	require.JSONEq(t, `"later"`, string(rec.Output))
	require.Zero(t, a.Stats().Completed)
	require.Zero(t, a.Stats().Rejected, "A dropped its late result without sending it")
	require.Equal(t, int64(2), a.Stats().Requeued)
	require.Equal(t, int64(1), b.Stats().Completed)
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventRequeued, queue.EventStarted, queue.EventCompleted},
		e.events.Of(stubborn))
}

// A result that is finished but not yet written when Stop runs out of time
// is written, not put back, before Stop returns. An Attempt hook holds the
// finished job between its handler's return and its result's hand-over to
// the writer until the stop has put the other job back.
func TestStopOutOfTimeWritesWhatFinished(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 2)
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		started <- struct{}{}
		if j.Args.County == "quick" {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	quick := enqueue(t, e, report{County: "quick"})
	slow := enqueue(t, e, report{County: "slow"})
	returned, release := make(chan struct{}), make(chan struct{})
	hold := queue.WithHooks(queue.Hooks{Attempt: func(ctx context.Context, job *queue.JobRecord) (context.Context, func(queue.Event)) {
		return ctx, func(ev queue.Event) {
			if job.ID == quick {
				close(returned)
				<-release
			}
		}
	}})
	r, err := queue.NewRunner(e.client, hold)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-started
	<-started
	<-returned
	// A 1 s margin: the cut puts slow back at 4 s and waits for quick's
	// result until 4.75 s, time for a loaded machine to see slow back and
	// write quick.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(ctx) }()
	e.waitStatus(t, slow, queue.StatusQueued) // put back: the stop now waits for what finished
	close(release)
	require.ErrorIs(t, <-stopped, context.DeadlineExceeded)
	require.Equal(t, queue.StatusCompleted, e.status(t, quick), "written before Stop returned")
	<-r.Done()
	require.Equal(t, int64(1), r.Stats().Completed)
	require.Equal(t, int64(1), r.Stats().Requeued)
}

// When the database cannot be reached as Stop runs out of time, Stop
// returns at its deadline all the same, and says that the jobs it could not
// put back will be rescued when their leases expire; they are PROCESSING
// under the runner's name meanwhile.
func TestStopOutOfTimeWithoutTheDatabaseSaysWhatBecomesOfTheJobs(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	started := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	id := enqueue(t, e, report{})
	co := startCutOff(t, e)
	<-started
	co.proxy.Partition()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := co.runner.Stop(ctx)
	require.WithinDuration(t, deadline, time.Now(), 500*time.Millisecond, "Stop returned at its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "rescued when their leases expire")
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusProcessing, rec.Status)
	require.Equal(t, "cut-off", *rec.LockedBy)
}

// A worker process that stops with a deadline when it is told to (as on
// SIGTERM) and exits the moment Stop returns strands nothing: the jobs it
// was running, longer than Stop's deadline, are back in the queue once it
// has exited, their attempts uncounted and none of them a suspect, whether
// their handlers honour their cancellation or ignore it; and Stop returned
// before its deadline.
func TestAProcessThatExitsWhenStopReturnsStrandsNothing(t *testing.T) {
	t.Parallel()
	for name, args := range map[string]queue.Args{"handlers honour cancellation": hangJob{}, "handlers ignore it": stubbornJob{}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := ledgerEnv(t)
			c := startChild(t, e.db.DSN, "exiting", 30*time.Second, nil, fmt.Sprintf("%s=%d", childStopMS, stopDeadline.Milliseconds()))
			jobs := make([]queue.Params, testWorkers) // one per worker, all running at once
			for i := range jobs {
				jobs[i] = queue.Params{Args: args}
			}
			res, err := e.client.EnqueueMany(context.Background(), jobs)
			require.NoError(t, err)
			for range jobs {
				c.expect(t, "started")
			}
			require.NoError(t, c.stdin.Close()) // stop now
			line := c.expect(t, "stop returned")
			t.Log(line) // microseconds Stop took, and before its deadline it returned
			var took, early int64
			_, err = fmt.Sscanf(line, "stop returned %d %d", &took, &early)
			require.NoError(t, err)
			require.Positive(t, early, "Stop returned before its deadline: %s", line)
			require.Contains(t, line, "put them back in the queue")
			<-c.exited()
			require.True(t, c.cmd.ProcessState.Success())
			requirePutBack(t, e, ids(res)...)
			require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'PROCESSING'"))
		})
	}
}
