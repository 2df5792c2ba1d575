package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[noop](func(ctx context.Context, j *queue.Job[noop]) error { return nil })))
	})
	ctx := context.Background()
	res, err := e.client.Enqueue(ctx, noop{})
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, res.Job.Status)
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, res.Job.ID, 1)
	rec, err := e.client.Get(ctx, res.Job.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
	require.Positive(t, rec.Duration())
}
