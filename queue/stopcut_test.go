package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// heldTxEnv is a queue whose txJob handler completes its job in a
// transaction it begins without the job's context, as ordinary gorm code
// does, and then waits for release without watching its context: it holds
// the job's row (on SQLite, the database's write lock) until released. Its
// holdJob handler returns as soon as it is cancelled.
func heldTxEnv(t *testing.T) (e *env, inTx, release, politeStarted chan struct{}) {
	t.Helper()
	inTx, release, politeStarted = make(chan struct{}), make(chan struct{}), make(chan struct{})
	e = txEnv(t, completeAndHold(inTx, release, false))
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[holdJob](func(ctx context.Context, _ *queue.Job[holdJob]) error {
		close(politeStarted)
		<-ctx.Done()
		return ctx.Err()
	})))
	return e, inTx, release, politeStarted
}

// A handler holding its job's row in the transaction of its CompleteTx,
// unmindful of its cancellation, does not keep a stop out of time from
// putting back the jobs it cuts short: the stop rolls that transaction back,
// so both jobs are QUEUED, their attempts uncounted, when Stop returns, and
// the handler's rows are gone with its completion.
func TestStopOutOfTimeRollsBackTheTransactionOfCompleteTx(t *testing.T) {
	t.Parallel()
	e, inTx, release, politeStarted := heldTxEnv(t)
	polite := enqueue(t, e, holdJob{})
	held := enqueue(t, e, txJob{})
	r, err := queue.NewRunner(e.client, quiet(), queue.WithWorkers(2))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	defer func() { <-r.Done() }()
	defer close(release)
	<-politeStarted
	<-inTx
	ctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
	defer cancel()
	err = r.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "cancelled 2 unfinished jobs and put them back in the queue")
	for _, id := range []int64{polite, held} {
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, rec.Status, "job %d", id)
		require.Zero(t, rec.Attempts, "job %d: the cut attempt is uncounted", id)
		require.Nil(t, rec.LockedBy)
	}
	require.Empty(t, e.ledger(t, held), "the handler's rows rolled back with its completion")
}

// A Stop after a cut that could not put the jobs back (Start's context
// ended while another transaction held a job's row) says so, rather than
// return nil with the job left PROCESSING.
func TestStopAfterAFailedCutSaysSo(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	id := enqueue(t, e, report{})
	// A lease of 6 s bounds the cut's put-back by a statement timeout of 1 s.
	r, err := queue.NewRunner(e.client, quiet(), queue.WithLease(6*time.Second))
	require.NoError(t, err)
	startCtx, cancelStart := context.WithCancel(context.Background())
	defer cancelStart()
	require.NoError(t, r.Start(startCtx))
	<-started
	// Another transaction holds the job's row (on SQLite, the database).
	lock := e.db.Gorm.Begin()
	defer lock.Rollback()
	require.NoError(t, lock.Exec("UPDATE sheaf_jobs SET status = status WHERE id = ?", id).Error)
	cancelStart()
	<-r.Done() // after the cut: the handler returns once cancelled
	err = r.Stop(context.Background())
	require.ErrorContains(t, err, "could not put them back in the queue")
	require.ErrorContains(t, err, "cancelled 1 unfinished jobs (0 put back in the queue)")
	// Read while the row is still held: once it is not, the put-back that
	// Stop gave up on may still land, if the server had not yet heard
	// that it was cancelled.
	require.Equal(t, queue.StatusProcessing, e.status(t, id), "stranded, as Stop said, until its lease expires")
	require.NoError(t, lock.Rollback().Error)
}

// A put-back waits for no held row before it puts back the others: a
// transaction of the test's holds one job's row through a stop out of
// time, and the other job is QUEUED when Stop returns, which says what it
// could not put back.
func TestStopOutOfTimePutsBackPastAHeldRow(t *testing.T) {
	t.Parallel()
	pgtest.RowLocks(t)
	var mu sync.Mutex
	started := map[int64]bool{}
	bothStarted := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		mu.Lock()
		started[j.ID] = true
		if len(started) == 2 {
			close(bothStarted)
		}
		mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}))
	free, held := enqueue(t, e, report{}), enqueue(t, e, report{})
	r, err := queue.NewRunner(e.client, quiet(), queue.WithWorkers(2))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	<-bothStarted
	lock := e.db.Gorm.Begin()
	defer lock.Rollback()
	require.NoError(t, lock.Exec("SELECT id FROM sheaf_jobs WHERE id = ? FOR UPDATE", held).Error)
	ctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
	defer cancel()
	err = r.Stop(ctx)
	require.ErrorContains(t, err, "cancelled 2 unfinished jobs (1 put back in the queue)")
	require.Equal(t, queue.StatusQueued, e.status(t, free))
	// Read while the row is still held: once it is not, the put-back that
	// Stop gave up on may still land, if the server had not yet heard
	// that it was cancelled.
	require.Equal(t, queue.StatusProcessing, e.status(t, held), "left to be rescued, as Stop said")
	require.NoError(t, lock.Rollback().Error)
	<-r.Done()
}

// A chunked attempt cut short by a stop out of time leaves its cleanup to
// the next attempt, which cleans up before it starts: the cut attempt's
// job may still be PROCESSING under its claim as it returns, so cleaning
// up then could delete the output of a next attempt that came first.
func TestChunkedCutShortLeavesItsCleanupToTheNextAttempt(t *testing.T) {
	t.Parallel()
	w := &reportWriter{}
	inChunk2, cleanups := cutInChunk2(w)
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 1500})
	a, err := queue.NewRunner(e.client, quiet(), queue.WithRunnerID("a"))
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	<-inChunk2
	ctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
	defer cancel()
	err = a.Stop(ctx)
	require.ErrorContains(t, err, "put them back in the queue")
	require.NotContains(t, err.Error(), "could not")
	<-a.Done()
	require.Equal(t, queue.StatusQueued, e.status(t, id))
	require.Zero(t, cleanups(), "the cut attempt did not clean up")
	require.Equal(t, int64(1000), e.outputRows(t, id), "the first chunk's output, for the next attempt to clean up")

	e.runner(t, queue.WithRunnerID("b"))
	e.waitStatus(t, id, queue.StatusCompleted)
	require.Equal(t, int64(1500), e.outputRows(t, id))
	require.Equal(t, 1, cleanups(), "the next attempt cleaned up before it started")
}

// TxClient.Cancel in a transaction that rolls back cancels nothing: the
// running job goes on. A committed cancel of another job, told to the
// runner after the first, shows the runner was told nothing of the first.
func TestTxCancelThatRollsBackLeavesTheJobRunning(t *testing.T) {
	t.Parallel()
	var first, second int64
	started := map[int64]chan struct{}{}
	release := make(chan struct{})
	causes := map[int64]chan error{}
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		close(started[j.ID])
		if j.ID == first {
			<-release
			causes[first] <- context.Cause(ctx)
			return nil
		}
		<-ctx.Done()
		causes[second] <- context.Cause(ctx)
		return ctx.Err()
	}))
	first, second = enqueue(t, e, report{}), enqueue(t, e, report{})
	for _, id := range []int64{first, second} {
		started[id], causes[id] = make(chan struct{}), make(chan error, 1)
	}
	e.runner(t, quiet(), queue.WithWorkers(2))
	<-started[first]
	<-started[second]
	rollback := errors.New("roll back")
	err := e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		rec, err := e.client.Tx(tx).Cancel(context.Background(), first)
		require.NoError(t, err)
		require.Equal(t, queue.StatusCancelled, rec.Status, "cancelled in the transaction")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	_, err = e.client.Cancel(context.Background(), second)
	require.NoError(t, err)
	require.ErrorIs(t, <-causes[second], queue.ErrCancelled)
	close(release)
	require.NoError(t, <-causes[first], "the first job's context was not cancelled")
	e.waitStatus(t, first, queue.StatusCompleted)
	require.NotContains(t, e.events.Of(first), queue.EventCancelled)
}

// The same, deterministic: the test holds the job's row, so that the
// put-back waits, and the cut attempt's handler returns while its job is
// still PROCESSING under its claim. It cleans up nothing, and the next
// attempt completes the job with all its output.
func TestChunkedCutShortCleansUpNothingWhileItsPutBackWaits(t *testing.T) {
	t.Parallel()
	pgtest.RowLocks(t)
	w := &reportWriter{}
	inChunk2, cleanups := cutInChunk2(w)
	e := chunkedEnv(t, w)
	id := enqueue(t, e, countyReport{Records: 1500})
	cutEnded := make(chan struct{})
	a, err := queue.NewRunner(e.client, quiet(), queue.WithRunnerID("a"), queue.WithHooks(queue.Hooks{
		Attempt: func(ctx context.Context, _ *queue.JobRecord) (context.Context, func(queue.Event)) {
			return ctx, func(ev queue.Event) {
				if ev.Type == queue.EventRequeued {
					close(cutEnded) // its handler returned, cleanup and all
				}
			}
		}}))
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background()))
	<-inChunk2
	lock := e.db.Gorm.Begin()
	defer lock.Rollback()
	require.NoError(t, lock.Exec("SELECT id FROM sheaf_jobs WHERE id = ? FOR UPDATE", id).Error)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
		defer cancel()
		stopped <- a.Stop(ctx)
	}()
	<-cutEnded
	require.Equal(t, queue.StatusProcessing, e.status(t, id), "the put-back waits for the test's transaction")
	require.Zero(t, cleanups(), "the cut attempt did not clean up")
	require.Equal(t, int64(1000), e.outputRows(t, id))
	require.NoError(t, lock.Rollback().Error)
	require.ErrorContains(t, <-stopped, "put them back in the queue")
	<-a.Done()
	e.runner(t, queue.WithRunnerID("b"))
	e.waitStatus(t, id, queue.StatusCompleted)
	require.Equal(t, int64(1500), e.outputRows(t, id))
}

// cutInChunk2 makes w's handler wait for its cancellation in the second
// chunk of its first attempt, and counts its cleanups: it returns a channel
// closed when that chunk begins, and the count.
func cutInChunk2(w *reportWriter) (inChunk2 <-chan struct{}, cleanups func() int) {
	in := make(chan struct{})
	var once sync.Once
	w.onChunk = func(ctx context.Context, _ *queue.Job[countyReport], chunk batch.Batch[int]) error {
		first := false
		if chunk.Seq == 2 {
			once.Do(func() { first = true })
		}
		if !first {
			return nil
		}
		close(in)
		<-ctx.Done()
		return ctx.Err()
	}
	var n atomic.Int32
	w.onCleanup = func(context.Context, *queue.Job[countyReport]) error {
		n.Add(1)
		return nil
	}
	return in, func() int { return int(n.Load()) }
}
