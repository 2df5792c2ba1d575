package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

type windowed struct{}

func (windowed) Kind() string { return "windowed" }

// ClosedWindow names the window that keeps a job from starting: its
// queue's first, then its kind's.
func TestClosedWindow(t *testing.T) {
	t.Parallel()
	night, err := queue.DailyWindow("23:00", "05:00", time.UTC)
	require.NoError(t, err)
	morning, err := queue.DailyWindow("06:00", "07:00", time.UTC)
	require.NoError(t, err)
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[windowed](func(context.Context, *queue.Job[windowed]) error { return nil }),
		queue.During(night)))
	reg.QueueWindow("mornings", morning)
	noon := time.Date(2025, 12, 8, 12, 0, 0, 0, time.UTC)
	midnight := time.Date(2025, 12, 8, 0, 0, 0, 0, time.UTC)
	sixThirty := time.Date(2025, 12, 8, 6, 30, 0, 0, time.UTC)

	w, ok := reg.ClosedWindow("windowed", queue.DefaultQueue, noon)
	require.True(t, ok)
	require.Equal(t, night.String(), w.String())
	_, ok = reg.ClosedWindow("windowed", queue.DefaultQueue, midnight)
	require.False(t, ok, "the kind's window is open")
	w, ok = reg.ClosedWindow("windowed", "mornings", midnight)
	require.True(t, ok)
	require.Equal(t, morning.String(), w.String(), "the queue's window is closed")
	w, ok = reg.ClosedWindow("windowed", "mornings", sixThirty)
	require.True(t, ok)
	require.Equal(t, night.String(), w.String(), "the queue's window is open, the kind's is not")
	_, ok = reg.ClosedWindow("other", queue.DefaultQueue, noon)
	require.False(t, ok, "an unknown kind on a queue without a window")
}
