package queue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

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
