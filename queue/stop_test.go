package queue_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
// their attempt counting, and their handlers learn why.
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
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = r.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, <-causes, queue.ErrStopping)
	<-r.Done()
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.Zero(t, rec.Attempts, "the interrupted attempt does not count")
	require.Nil(t, rec.LockedBy)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	// nil, or a deadline error and the rest unwinds in the background:
	// either way nothing is left PROCESSING once Done is closed.
	_ = r.Stop(ctx)
	close(stopProducer)
	wg.Wait()
	<-r.Done()
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'PROCESSING'"))
	require.Equal(t, produced.Load(), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status IN ('COMPLETED', 'QUEUED')"))
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED' AND attempts > 0"),
		"requeued jobs kept their attempt count at zero")
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
	// slow two for its workers and two short ones ahead of need.
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
	require.Equal(t, int64(2), a.Stats().Requeued)
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

// When Stop runs out of time, a job whose handler returns at once goes back
// to the queue then, not when the slowest handler returns: its lease is not
// renewed once it has finished, and the rescuer would otherwise fail it.
func TestStopPutsEachJobBackAsItsHandlerReturns(t *testing.T) {
	t.Parallel()
	started := make(chan string, 2)
	slow := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		started <- j.Args.County
		if j.Args.County == "slow" {
			<-slow // ignores its context for longer than the lease
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}, queue.MaxAttempts(1)))
	polite := enqueue(t, e, report{County: "polite"})
	stubborn := enqueue(t, e, report{County: "slow"})
	r, err := queue.NewRunner(e.client, queue.WithLease(500*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-started
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(ctx) }()
	e.waitLeaves(t, polite, queue.StatusProcessing)
	rec, err := e.client.Get(context.Background(), polite)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status, "back in the queue, not rescued and failed")
	require.Zero(t, rec.Attempts)
	require.ErrorIs(t, <-stopped, context.DeadlineExceeded, "Stop returns at its deadline, whatever the handlers do")
	require.Equal(t, queue.StatusProcessing, e.status(t, stubborn), "not put back while its handler runs")
	close(slow)
	<-r.Done()
	require.Equal(t, queue.StatusQueued, e.status(t, stubborn))
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventRequeued}, e.events.Of(polite))
	require.Equal(t, int64(2), r.Stats().Requeued)
}
