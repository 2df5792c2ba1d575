package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
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

// The ticks a review expects: those in a range, on a local date, and the
// one a run ID names.
func TestTimingBetweenOnDayAndOf(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	c, err := cron.ParseStandard("0 */12 * * *")
	require.NoError(t, err)
	s := &Timing{Name: "twice", Cron: c, Location: ny}
	at := func(d, h int) time.Time { return time.Date(2025, 11, d, h, 0, 0, 0, ny) }

	require.Equal(t, []time.Time{at(1, 0), at(1, 12), at(2, 0)}, s.Between(at(1, 0), at(2, 12)), "from inclusive, to exclusive")
	require.Empty(t, s.Between(at(1, 1), at(1, 12)))
	require.Equal(t, []time.Time{at(2, 0), at(2, 12)}, s.OnDay("2025-11-02"), "the 25-hour day of the change has its two ticks")
	require.Empty(t, s.OnDay("night of the 2nd"), "a period set by hand")

	tick := s.Tick(at(2, 12))
	got, ok := s.Of(tick.RunID)
	require.True(t, ok)
	require.True(t, got.Equal(at(2, 12)))
	for _, id := range []string{"other@" + at(2, 12).Format(time.RFC3339), "twice@yesterday", "twice", ""} {
		_, ok := s.Of(id)
		require.False(t, ok, id)
	}
}

// latest keeps the last ticks it is asked for, oldest first, and counts
// them all.
func TestTimingLatestKeepsTheNewest(t *testing.T) {
	t.Parallel()
	c, err := cron.ParseStandard("0 * * * *")
	require.NoError(t, err)
	s := &Timing{Name: "hourly", Cron: c, Location: time.UTC}
	h := func(n int) time.Time { return time.Date(2025, 12, 8, n, 0, 0, 0, time.UTC) }
	for _, k := range []struct{ keep, want int }{{1, 1}, {3, 3}, {5, 5}, {6, 5}, {1000, 5}} {
		last, n := s.latest(h(17), h(22).Add(30*time.Minute), k.keep)
		require.Equal(t, 5, n, "18:00 to 22:00")
		require.Len(t, last, k.want)
		for i, at := range last {
			require.Equal(t, h(22-k.want+1+i), at, "keep %d", k.keep)
		}
	}
	last, n := s.latest(h(22), h(22).Add(30*time.Minute), 3)
	require.Zero(t, n)
	require.Empty(t, last)
	require.Equal(t, time.Minute, DefaultGrace(time.Second))
	require.Equal(t, 4*time.Minute, DefaultGrace(2*time.Minute))
}

// NewTiming parses the expression in the location, UTC for none, and
// refuses a preset's refusal, a missing expression and a bad one, naming
// the schedule.
func TestNewTiming(t *testing.T) {
	t.Parallel()
	tm, err := NewTiming("nightly", "0 23 * * *", nil, nil, 2, time.Minute)
	require.NoError(t, err)
	require.Equal(t, time.UTC, tm.Location)
	require.Equal(t, 2, tm.CatchUp)
	require.Equal(t, time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC), tm.Next(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)))
	for _, tc := range []struct {
		expr   string
		preset error
		want   string
	}{
		{"", errors.New("Daily(25, 0): hour 25 not in [0, 23]"), `schedule "s": Daily(25, 0)`},
		{"", nil, "no Spec"},
		{"61 * * * *", nil, `schedule "s"`},
		{"TZ=UTC 0 0 * * *", nil, "Location"},
	} {
		_, err := NewTiming("s", tc.expr, tc.preset, nil, 0, 0)
		require.ErrorIs(t, err, check.ErrInvalidOption, tc.expr)
		require.ErrorContains(t, err, tc.want)
	}
}
