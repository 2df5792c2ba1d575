package queue_test

// Poison jobs: a handler that ends its process takes the jobs it was
// claimed with down too, but only once. They come back as suspects, run
// one at a time, and only the poison job's attempts are counted.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// workInChildren runs runner processes one after another, each started
// when the last one died, until every job of ids is final. It returns how
// many processes died.
func workInChildren(t *testing.T, e *env, ids []int64) (deaths int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	final := make(chan error, 1)
	go func() {
		_, err := e.client.Wait(ctx, ids...)
		final <- err
	}()
	for {
		// A lease long enough that a loaded machine renews it in time.
		id := fmt.Sprint("poisoned-", deaths)
		c := startChild(t, e.db.DSN, id, 2*time.Second, nil)
		select {
		case <-c.exited():
			deaths++
			require.Less(t, deaths, 20, "the poison job never ran out of attempts")
			e.expireRunner(t, id)
		case err := <-final:
			require.NoError(t, err)
			require.NoError(t, c.stdin.Close()) // stop gracefully
			<-c.exited()
			require.True(t, c.cmd.ProcessState.Success(), "the last runner stopped cleanly")
			return deaths
		}
	}
}

func ids(res []queue.Enqueued) []int64 {
	out := make([]int64, len(res))
	for i, r := range res {
		out[i] = r.Job.ID
	}
	return out
}

// One EnqueueMany of a job that exits its process (MaxAttempts 3) and three
// ordinary half-second jobs, worked by a runner with four workers that is
// restarted whenever it dies: the poison job fails after exactly its three
// attempts; the others complete, none charged for the poison job's crashes.
func TestPoisonJobDiesAloneAndItsNeighboursComplete(t *testing.T) {
	t.Parallel()
	e := ledgerEnv(t)
	res, err := e.client.EnqueueMany(context.Background(), []queue.Params{
		{Args: poisonJob{}, Options: []queue.EnqueueOption{queue.MaxAttempts(3)}},
		{Args: napJob{Ms: 500}}, {Args: napJob{Ms: 500}}, {Args: napJob{Ms: 500}},
	})
	require.NoError(t, err)
	deaths := workInChildren(t, e, ids(res))
	require.Equal(t, 4, deaths, "once with its neighbours, then alone for each of its attempts")

	recs, err := e.client.Wait(context.Background(), ids(res)...)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, recs[0].Status)
	require.Equal(t, 3, recs[0].Attempts, "the poison job used exactly its attempts")
	require.Contains(t, *recs[0].LastError, "lease expired")
	for _, rec := range recs[1:] {
		require.Equal(t, queue.StatusCompleted, rec.Status)
		// The crash it shared is not counted. (On a machine loaded enough
		// that a child cannot renew its 2 s lease in time, a rescue of a
		// live child costs one attempt more, as a lost lease does.)
		require.LessOrEqual(t, rec.Attempts, 2, "the crash it shared was not counted")
		require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM ledger WHERE job_id = ?", rec.ID), "worked once to the end")
	}
}

// 400 short ordinary jobs and one poison job among them: no ordinary job
// uses more than two attempts (on an idle machine none uses more than one;
// a loaded one may let a lease expire), and every
// one is worked to the end. (Some may be worked to the end twice: a job
// whose work was done, but whose completion was not yet written when the
// poison job ended the process, runs again. At least once.)
func TestPoisonJobAmongManyCostsTheOthersNoAttempts(t *testing.T) {
	t.Parallel()
	e := ledgerEnv(t)
	jobs := make([]queue.Params, 401)
	for i := range jobs {
		jobs[i] = queue.Params{Args: napJob{Ms: 20}}
	}
	jobs[200] = queue.Params{Args: poisonJob{}, Options: []queue.EnqueueOption{queue.MaxAttempts(3)}}
	res, err := e.client.EnqueueMany(context.Background(), jobs)
	require.NoError(t, err)
	workInChildren(t, e, ids(res))

	poison, err := e.client.Get(context.Background(), res[200].Job.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, poison.Status)
	require.Equal(t, 3, poison.Attempts)
	require.Equal(t, int64(400), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'nap' AND status = 'COMPLETED'"))
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'nap' AND attempts > 2"), "no ordinary job used more than two attempts")
	require.Equal(t, int64(400), e.db.Count(t, "SELECT count(DISTINCT job_id) FROM ledger"))
}
