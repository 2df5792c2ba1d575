package queue

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

func TestPoolAdvice(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none") // never connects
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	advice := poolAdvice(db, 100, 50)
	require.Contains(t, advice, "no limit on open connections")
	require.Contains(t, advice, "the server accepts 50 more")
	require.Contains(t, advice, "SetMaxIdleConns(50)")

	db.SetMaxOpenConns(40)
	advice = poolAdvice(db, 100, 50)
	require.NotContains(t, advice, "no limit")
	require.Contains(t, advice, "SetMaxIdleConns(40)")

	db.SetMaxIdleConns(40)
	require.Empty(t, poolAdvice(db, 100, 50))
	n, known := maxIdleConns(db)
	require.True(t, known)
	require.Equal(t, 40, n)
}

// The runner reports events by package queue's numbers.
func TestRunnerEventTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		runner runner.EventType
		public EventType
	}{
		{runner.EventStarted, EventStarted}, {runner.EventCompleted, EventCompleted}, {runner.EventRetrying, EventRetrying},
		{runner.EventFailed, EventFailed}, {runner.EventCancelled, EventCancelled}, {runner.EventRescued, EventRescued},
		{runner.EventRequeued, EventRequeued}, {runner.EventRejected, EventRejected}, {runner.EventReleased, EventReleased},
		{runner.EventScheduled, EventScheduled},
	} {
		require.Equal(t, tc.public.String(), eventOf(runner.Event{Type: tc.runner}).Type.String())
	}
}
