package calendar

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestParseCron(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"":                    "no Spec: use Cron or a preset",
		"TZ=UTC 0 0 * * *":    `Cron("TZ=UTC 0 0 * * *"): set Periodic.Location instead of a time zone in the expression`,
		"CRON_TZ=UTC @daily":  `Cron("CRON_TZ=UTC @daily"): set Periodic.Location instead of a time zone in the expression`,
		"every day":           `Cron("every day"): expected exactly 5 fields, found 2: [every day]`,
		"61 * * * *":          `Cron("61 * * * *"): end of range (61) above maximum (59): 61`,
		"0 0 * * * *":         `Cron("0 0 * * * *"): expected exactly 5 fields, found 6: [0 0 * * * *]`,
		"@fortnightly":        `Cron("@fortnightly"): unrecognized descriptor: @fortnightly`,
		"30 23 * * 1":         "",
		"@daily":              "",
		"0 0 1 1,4,7,10 *":    "",
		"*/15 9-17 * * 1-5":   "",
		"0 0 29 2 *":          "", // leap years only, but it fires
		"0 0 30 2 *":          "", // never fires: package queue refuses it by its next tick
		"5 4 * * sun":         "",
		"0 12 * * MON-FRI":    "",
		"0 0 L * *":           `Cron("0 0 L * *"): failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax`,
		"0 0 1 JAN-DEC/3 *":   "",
		"0 0 ? * *":           "",
		"@every 1h":           "",
		"@midnight":           "",
		"0 0 1 13 *":          `Cron("0 0 1 13 *"): end of range (13) above maximum (12): 13`,
		"0 24 * * *":          `Cron("0 24 * * *"): end of range (24) above maximum (23): 24`,
		"0 0 0 * *":           `Cron("0 0 0 * *"): beginning of range (0) below minimum (1): 0`,
		"0 0 * * 8":           `Cron("0 0 * * 8"): end of range (8) above maximum (6): 8`,
		"  30 23 * * 1  ":     "",
		"30 23 * * 1 # night": `Cron("30 23 * * 1 # night"): expected exactly 5 fields, found 7: [30 23 * * 1 # night]`,
	} {
		c, err := ParseCron(expr)
		if want != "" {
			require.EqualError(t, err, want, "%q", expr)
			require.Nil(t, c)
			continue
		}
		require.NoError(t, err, "%q", expr)
		require.NotNil(t, c)
	}
	c, err := ParseCron("30 23 * * 1")
	require.NoError(t, err)
	require.Equal(t, time.Date(2025, 12, 8, 23, 30, 0, 0, time.UTC), c.Next(time.Date(2025, 12, 3, 0, 0, 0, 0, time.UTC)))
}

func TestCheckArgs(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckArgs("Daily(0, 0)", Hour(0), Minute(0)))
	require.NoError(t, CheckArgs("Daily(23, 59)", Hour(23), Minute(59)))
	require.NoError(t, CheckArgs("none"))
	require.EqualError(t, CheckArgs("Daily(24, 0)", Hour(24), Minute(0)), "Daily(24, 0): hour 24 not in [0, 23]")
	require.EqualError(t, CheckArgs("Daily(-1, -1)", Hour(-1), Minute(-1)), "Daily(-1, -1): hour -1 not in [0, 23]", "the first one out")
	require.EqualError(t, CheckArgs("Daily(1, 60)", Hour(1), Minute(60)), "Daily(1, 60): minute 60 not in [0, 59]")
	require.EqualError(t, CheckArgs("f", Arg{"day", 0, 1, 31}), "f: day 0 not in [1, 31]")
}

func TestNamedAndDaysIn(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Monday", Named(time.Monday, true))
	require.Equal(t, "9", Named(time.Weekday(9), false))
	require.Equal(t, "-1", Named(time.Month(-1), false))
	for month, days := range map[time.Month]int{time.January: 31, time.February: 29, time.April: 30, time.December: 31} {
		require.Equal(t, days, DaysIn(month), month.String())
	}
}

func TestClockTime(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]time.Duration{"00:00": 0, "05:00": 5 * time.Hour, "23:59": 23*time.Hour + 59*time.Minute, "9:30": 9*time.Hour + 30*time.Minute} {
		d, ok := ClockTime(s)
		require.True(t, ok, s)
		require.Equal(t, want, d, s)
	}
	for _, s := range []string{"", "24:00", "12:60", "noon", "12:00:00", "-1:00"} {
		_, ok := ClockTime(s)
		require.False(t, ok, s)
	}
}

func TestWindowOpenAndString(t *testing.T) {
	t.Parallel()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	night := Window{Start: 23 * time.Hour, End: 5 * time.Hour, Loc: kolkata}
	day := Window{Start: 9 * time.Hour, End: 17*time.Hour + 30*time.Minute, Loc: time.UTC}
	at := func(h, m, s int, loc *time.Location) time.Time { return time.Date(2025, 12, 8, h, m, s, 0, loc) }
	for _, tc := range []struct {
		w    Window
		t    time.Time
		open bool
	}{
		{night, at(22, 59, 59, kolkata), false},
		{night, at(23, 0, 0, kolkata), true},
		{night, at(4, 59, 59, kolkata), true},
		{night, at(5, 0, 0, kolkata), false},
		{night, at(18, 0, 0, time.UTC), true}, // 23:30 in Kolkata
		{day, at(17, 29, 59, time.UTC), true},
		{day, at(17, 30, 0, time.UTC), false},
		{Window{Start: time.Hour, End: time.Hour, Loc: time.UTC}, at(0, 0, 0, time.UTC), true},
		{Window{}, at(0, 0, 0, time.UTC), true},
	} {
		require.Equal(t, tc.open, tc.w.Open(tc.t), "%v at %v", tc.w, tc.t)
	}
	require.True(t, night.Closes())
	require.False(t, Window{}.Closes())
	require.Equal(t, "23:00-05:00 Asia/Kolkata", night.String())
	require.Equal(t, "09:00-17:30 UTC", day.String())
	require.Equal(t, "always", Window{}.String())
}

// A closed window opens at its wall-clock start, also on the days clocks
// change.
func TestWindowOpensByTheWallClockAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	night := Window{Start: 23 * time.Hour, End: 5 * time.Hour, Loc: ny}
	for _, day := range []int{9, 10} { // 2025-03-09 is 23 hours long in New York
		noon := time.Date(2025, 3, day, 12, 0, 0, 0, ny)
		require.Equal(t, time.Date(2025, 3, day, 23, 0, 0, 0, ny), night.NextOpen(noon), "March %d", day)
	}
	fallBack := time.Date(2025, 11, 2, 12, 0, 0, 0, ny) // 25 hours long
	require.Equal(t, time.Date(2025, 11, 2, 23, 0, 0, 0, ny), night.NextOpen(fallBack))
	require.Equal(t, time.Date(2025, 11, 3, 23, 0, 0, 0, ny), night.NextOpen(time.Date(2025, 11, 3, 5, 0, 0, 0, ny)), "just closed")
	open := time.Date(2025, 11, 2, 23, 30, 0, 0, ny)
	require.Equal(t, open, night.NextOpen(open), "open now")
	early := Window{Start: time.Hour + 30*time.Minute, End: 4 * time.Hour, Loc: ny}
	require.Equal(t, time.Date(2025, 11, 3, 1, 30, 0, 0, ny), early.NextOpen(time.Date(2025, 11, 2, 4, 0, 0, 0, ny)), "the next day once today's start has passed")
}
