package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
)

// Any maintain.Task is a MaintenanceTask, and the other way round.
var (
	_ queue.MaintenanceTask = maintain.Task(nil)
	_ maintain.Task         = queue.MaintenanceTask(nil)
)

// beat is a maintenance task that reports each round on a channel, with
// the runner it ran on.
type beat struct {
	runner string
	rounds chan string
}

func (beat) Name() string { return "beat" }

func (b beat) Run(ctx context.Context) (time.Duration, error) {
	select {
	case b.rounds <- b.runner:
	case <-ctx.Done():
	}
	return 10 * time.Millisecond, nil
}

// leaderOf returns the ID of the runner that Client.Runners says leads,
// "" if none does.
func leaderOf(t *testing.T, c *queue.Client) string {
	t.Helper()
	rs, err := c.Runners(context.Background(), 0)
	require.NoError(t, err)
	for _, r := range rs {
		if r.Leader {
			return r.ID
		}
	}
	return ""
}

// Of runners given the same task, only the leader runs it; a runner
// without maintenance never leads. When the leader stops, another takes
// over, within a third of its lease.
func TestMaintenanceRunsOnTheLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	rounds := make(chan string, 100)
	start := func(id string, opts ...queue.RunnerOption) *queue.Runner {
		r, err := queue.NewRunner(e.client, append([]queue.RunnerOption{queue.WithRunnerID(id), queue.WithLease(3 * time.Second)}, opts...)...)
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
		return r
	}
	web := start("web", queue.WithoutMaintenance())
	a := start("a", queue.WithMaintenance(beat{"a", rounds}))
	require.Equal(t, "a", <-rounds)
	b := start("b", queue.WithMaintenance(beat{"b", rounds}))
	require.Equal(t, "a", leaderOf(t, e.client))
	for range 5 {
		require.Equal(t, "a", <-rounds, "a leads on")
	}

	require.NoError(t, a.Stop(context.Background()))
	stopped := time.Now()
	for r := range rounds { // rounds a ran before it stopped
		if r == "b" {
			break
		}
	}
	t.Logf("b took over %v after a stopped", time.Since(stopped))
	require.Equal(t, "b", leaderOf(t, e.client))
	require.NoError(t, b.Stop(context.Background()))
	require.Empty(t, leaderOf(t, e.client), "b gave the leadership up; web does not campaign")
	require.Zero(t, web.Stats().Rescued)
}

// Only the leader rescues, every WithRescueInterval: the job of a runner
// whose lease expired is rescued by the leader, not by the other runner,
// which would scan far more often.
func TestOnlyTheLeaderRescues(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}))
	leader := e.runner(t, queue.WithRunnerID("leader"), queue.WithRescueInterval(50*time.Millisecond))
	require.Eventually(t, func() bool { return leaderOf(t, e.client) == "leader" }, 10*time.Second, 5*time.Millisecond)
	other := e.runner(t, queue.WithRunnerID("other"), queue.WithRescueInterval(10*time.Millisecond))
	t.Cleanup(func() { close(release) }) // before the runners stop
	id := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventStarted, id, 1)
	e.expireLease(t, id)
	e.events.Wait(t, queue.EventRescued, id, 1)
	require.Equal(t, int64(1), leader.Stats().Rescued)
	require.Zero(t, other.Stats().Rescued)
}

// WithMaintenance refuses a nil task, and a runner that does not campaign
// refuses tasks it would never run.
func TestMaintenanceOptionsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, err := queue.NewRunner(e.client, queue.WithMaintenance(beat{}, nil))
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.ErrorContains(t, err, "WithMaintenance: task 1 is nil")
	_, err = queue.NewRunner(e.client, queue.WithoutMaintenance(), queue.WithMaintenance(beat{}))
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.ErrorContains(t, err, "would never run its 1 tasks")
	r, err := queue.NewRunner(e.client, queue.WithoutMaintenance(), queue.WithMaintenance())
	require.NoError(t, err, "no tasks: nothing lost")
	require.NoError(t, r.Stop(context.Background()))
	require.False(t, errors.Is(err, queue.ErrInvalidOption))
}
