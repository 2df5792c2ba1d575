package runner

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
)

// A schedule's ticks in its location: the tick's run and period are its
// local time and date; the hour repeated when clocks go back fires once;
// Latest counts the ticks between two times.
func TestTiming(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	c, err := cron.ParseStandard("30 2 * * *")
	require.NoError(t, err)
	s := &Timing{Name: "nightly", Cron: c, Location: berlin}

	tick := s.Tick(time.Date(2026, 3, 1, 1, 30, 0, 0, time.UTC))
	require.Equal(t, "nightly@2026-03-01T02:30:00+01:00", tick.RunID)
	require.Equal(t, "2026-03-01", tick.Period)
	require.Equal(t, berlin, tick.At.Location())

	// 2026-10-25: clocks go back at 03:00 CEST, so 02:30 comes twice.
	first := s.Next(time.Date(2026, 10, 25, 0, 0, 0, 0, berlin))
	require.Equal(t, time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), first.UTC(), "02:30 CEST")
	require.Equal(t, time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC), s.Next(first).UTC(), "not 02:30 CET the same night")

	last, n := s.Latest(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 3, 4, 0, 0, 0, 0, berlin))
	require.Equal(t, 3, n)
	require.Equal(t, time.Date(2026, 3, 3, 2, 30, 0, 0, berlin), last)
	_, n = s.Latest(time.Date(2026, 3, 1, 3, 0, 0, 0, berlin), time.Date(2026, 3, 2, 2, 0, 0, 0, berlin))
	require.Zero(t, n)
}
