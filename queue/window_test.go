package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The runner wakes when a closed window opens; on the days clocks change,
// that is still the window's wall-clock start.
func TestWindowOpensByTheWallClockAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	night, err := DailyWindow("23:00", "05:00", ny)
	require.NoError(t, err)
	for _, day := range []int{9, 10} { // 2025-03-09 is 23 hours long in New York
		noon := time.Date(2025, 3, day, 12, 0, 0, 0, ny)
		require.Equal(t, time.Date(2025, 3, day, 23, 0, 0, 0, ny), night.NextOpen(noon), "March %d", day)
	}
	fallBack := time.Date(2025, 11, 2, 12, 0, 0, 0, ny) // 25 hours long
	require.Equal(t, time.Date(2025, 11, 2, 23, 0, 0, 0, ny), night.NextOpen(fallBack))
	require.Equal(t, time.Date(2025, 11, 3, 23, 0, 0, 0, ny), night.NextOpen(time.Date(2025, 11, 3, 5, 0, 0, 0, ny)), "just closed")
	open := time.Date(2025, 11, 2, 23, 30, 0, 0, ny)
	require.Equal(t, open, night.NextOpen(open), "open now")
}
