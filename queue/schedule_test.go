package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	pubtest "github.com/sheaf-dev/sheaf/queue/queuetest"
)

// newClock returns a clock that moves only when the test says so.
func newClock(t time.Time) *pubtest.Clock { return pubtest.NewClock(t) }

func mustLoad(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// ticks lists the n ticks of p after from, formatted in p's location.
func ticks(t *testing.T, p queue.Periodic, from time.Time, n int) []string {
	t.Helper()
	var out []string
	for range n {
		next, err := p.Next(from)
		require.NoError(t, err)
		out = append(out, next.Format("2006-01-02 15:04 MST"))
		from = next
	}
	return out
}

// Every preset, and cron expressions, across month ends and in zones with
// daylight saving: ticks keep their local wall-clock time whichever offset is in
// force, a tick in the spring-forward gap is skipped that night (week, month,
// quarter, year), one in the repeated fall-back hour fires once, and a
// Monthly day a month lacks has no tick in that month.
func TestPresetsAcrossDSTAndMonthEnds(t *testing.T) {
	t.Parallel()
	ny := mustLoad(t, "America/New_York")
	kolkata := mustLoad(t, "Asia/Kolkata")
	berlin := mustLoad(t, "Europe/Berlin")    // 2025: forward Mar 30, back Oct 26
	sydney := mustLoad(t, "Australia/Sydney") // 2025: forward Oct 5; 2026: back Apr 5
	for _, tc := range []struct {
		name string
		p    queue.Periodic
		from time.Time
		want []string
	}{
		{"daily 23:00 through spring forward", queue.Periodic{Spec: queue.Daily(23, 0), Location: ny},
			time.Date(2025, 3, 8, 12, 0, 0, 0, ny),
			[]string{"2025-03-08 23:00 EST", "2025-03-09 23:00 EDT", "2025-03-10 23:00 EDT"}},
		{"daily 23:00 through fall back", queue.Periodic{Spec: queue.Daily(23, 0), Location: ny},
			time.Date(2025, 11, 1, 12, 0, 0, 0, ny),
			[]string{"2025-11-01 23:00 EDT", "2025-11-02 23:00 EST", "2025-11-03 23:00 EST"}},
		{"cron 02:30 skips the spring-forward gap", queue.Periodic{Spec: queue.Cron("30 2 * * *"), Location: ny},
			time.Date(2025, 3, 8, 12, 0, 0, 0, ny),
			[]string{"2025-03-10 02:30 EDT", "2025-03-11 02:30 EDT"}},
		{"cron 01:30 fires once in the repeated hour", queue.Periodic{Spec: queue.Cron("30 1 * * *"), Location: ny},
			time.Date(2025, 11, 1, 12, 0, 0, 0, ny),
			[]string{"2025-11-02 01:30 EDT", "2025-11-03 01:30 EST"}},
		{"weekly Monday 23:00 in Kolkata", queue.Periodic{Spec: queue.Weekly(time.Monday, 23, 0), Location: kolkata},
			time.Date(2025, 12, 3, 0, 0, 0, 0, kolkata),
			[]string{"2025-12-08 23:00 IST", "2025-12-15 23:00 IST"}},
		{"monthly on the 31st skips short months", queue.Periodic{Spec: queue.Monthly(31, 23, 0), Location: kolkata},
			time.Date(2025, 1, 31, 23, 30, 0, 0, kolkata),
			[]string{"2025-03-31 23:00 IST", "2025-05-31 23:00 IST", "2025-07-31 23:00 IST"}},
		{"monthly on the 1st, across the year", queue.Periodic{Spec: queue.Monthly(1, 23, 0), Location: kolkata},
			time.Date(2025, 11, 15, 0, 0, 0, 0, kolkata),
			[]string{"2025-12-01 23:00 IST", "2026-01-01 23:00 IST"}},
		{"quarterly", queue.Periodic{Spec: queue.Quarterly(1, 23, 0), Location: kolkata},
			time.Date(2025, 2, 1, 0, 0, 0, 0, kolkata),
			[]string{"2025-04-01 23:00 IST", "2025-07-01 23:00 IST", "2025-10-01 23:00 IST", "2026-01-01 23:00 IST"}},
		{"yearly January 1st at midnight", queue.Periodic{Spec: queue.Yearly(time.January, 1, 0, 0), Location: kolkata},
			time.Date(2025, 6, 1, 0, 0, 0, 0, kolkata),
			[]string{"2026-01-01 00:00 IST", "2027-01-01 00:00 IST"}},
		{"cron in UTC by default", queue.Periodic{Spec: queue.Cron("0 */6 * * *")},
			time.Date(2025, 12, 31, 20, 0, 0, 0, time.UTC),
			[]string{"2026-01-01 00:00 UTC", "2026-01-01 06:00 UTC"}},
		{"weekly Sunday 23:00 through spring forward", queue.Periodic{Spec: queue.Weekly(time.Sunday, 23, 0), Location: ny},
			time.Date(2025, 3, 1, 12, 0, 0, 0, ny),
			[]string{"2025-03-02 23:00 EST", "2025-03-09 23:00 EDT", "2025-03-16 23:00 EDT"}},
		{"weekly Sunday 23:00 through fall back", queue.Periodic{Spec: queue.Weekly(time.Sunday, 23, 0), Location: ny},
			time.Date(2025, 10, 25, 12, 0, 0, 0, ny),
			[]string{"2025-10-26 23:00 EDT", "2025-11-02 23:00 EST", "2025-11-09 23:00 EST"}},
		{"weekly Sunday 02:30 skips the spring-forward gap", queue.Periodic{Spec: queue.Weekly(time.Sunday, 2, 30), Location: ny},
			time.Date(2025, 3, 1, 12, 0, 0, 0, ny),
			[]string{"2025-03-02 02:30 EST", "2025-03-16 02:30 EDT"}},
		{"weekly Sunday 01:30 fires once in the repeated hour", queue.Periodic{Spec: queue.Weekly(time.Sunday, 1, 30), Location: ny},
			time.Date(2025, 10, 30, 12, 0, 0, 0, ny),
			[]string{"2025-11-02 01:30 EDT", "2025-11-09 01:30 EST"}},
		{"weekly Sunday 02:30 in Berlin skips the gap", queue.Periodic{Spec: queue.Weekly(time.Sunday, 2, 30), Location: berlin},
			time.Date(2025, 3, 25, 12, 0, 0, 0, berlin),
			[]string{"2025-04-06 02:30 CEST"}},
		{"monthly on the 31st skips short months across both changes", queue.Periodic{Spec: queue.Monthly(31, 23, 0), Location: ny},
			time.Date(2025, 1, 15, 0, 0, 0, 0, ny),
			[]string{"2025-01-31 23:00 EST", "2025-03-31 23:00 EDT", "2025-05-31 23:00 EDT", "2025-07-31 23:00 EDT",
				"2025-08-31 23:00 EDT", "2025-10-31 23:00 EDT", "2025-12-31 23:00 EST"}},
		{"monthly on the 29th skips February outside leap years", queue.Periodic{Spec: queue.Monthly(29, 23, 0), Location: ny},
			time.Date(2027, 1, 15, 0, 0, 0, 0, ny),
			[]string{"2027-01-29 23:00 EST", "2027-03-29 23:00 EDT"}},
		{"monthly on the 29th in a leap year", queue.Periodic{Spec: queue.Monthly(29, 23, 0), Location: ny},
			time.Date(2028, 1, 15, 0, 0, 0, 0, ny),
			[]string{"2028-01-29 23:00 EST", "2028-02-29 23:00 EST", "2028-03-29 23:00 EDT"}},
		{"monthly on the 9th at 02:30 skips March's gap", queue.Periodic{Spec: queue.Monthly(9, 2, 30), Location: ny},
			time.Date(2025, 2, 10, 0, 0, 0, 0, ny),
			[]string{"2025-04-09 02:30 EDT", "2025-05-09 02:30 EDT"}},
		{"monthly on the 2nd at 01:30 fires once in November", queue.Periodic{Spec: queue.Monthly(2, 1, 30), Location: ny},
			time.Date(2025, 10, 3, 0, 0, 0, 0, ny),
			[]string{"2025-11-02 01:30 EDT", "2025-12-02 01:30 EST"}},
		{"quarterly 23:00 in Berlin", queue.Periodic{Spec: queue.Quarterly(1, 23, 0), Location: berlin},
			time.Date(2025, 2, 1, 0, 0, 0, 0, berlin),
			[]string{"2025-04-01 23:00 CEST", "2025-07-01 23:00 CEST", "2025-10-01 23:00 CEST", "2026-01-01 23:00 CET", "2026-04-01 23:00 CEST"}},
		{"quarterly 02:30 in Berlin fires once in October's repeated hour", queue.Periodic{Spec: queue.Quarterly(26, 2, 30), Location: berlin},
			time.Date(2025, 10, 1, 0, 0, 0, 0, berlin),
			[]string{"2025-10-26 02:30 CEST", "2026-01-26 02:30 CET"}},
		{"quarterly 02:30 in Sydney: gap skipped, repeated hour once", queue.Periodic{Spec: queue.Quarterly(5, 2, 30), Location: sydney},
			time.Date(2025, 8, 1, 0, 0, 0, 0, sydney),
			[]string{"2026-01-05 02:30 AEDT", "2026-04-05 02:30 AEDT", "2026-07-05 02:30 AEST", "2026-10-05 02:30 AEDT"}},
		{"yearly on local time either side of the changes", queue.Periodic{Spec: queue.Yearly(time.July, 4, 9, 0), Location: ny},
			time.Date(2025, 12, 1, 0, 0, 0, 0, ny),
			[]string{"2026-07-04 09:00 EDT", "2027-07-04 09:00 EDT"}},
		{"yearly December 31st 23:00", queue.Periodic{Spec: queue.Yearly(time.December, 31, 23, 0), Location: berlin},
			time.Date(2025, 6, 1, 0, 0, 0, 0, berlin),
			[]string{"2025-12-31 23:00 CET", "2026-12-31 23:00 CET"}},
		{"yearly March 9th 02:30 skips 2025's gap", queue.Periodic{Spec: queue.Yearly(time.March, 9, 2, 30), Location: ny},
			time.Date(2025, 1, 1, 0, 0, 0, 0, ny),
			[]string{"2026-03-09 02:30 EDT", "2027-03-09 02:30 EST"}},
		{"yearly November 2nd 01:30 fires once in 2025's repeated hour", queue.Periodic{Spec: queue.Yearly(time.November, 2, 1, 30), Location: ny},
			time.Date(2025, 1, 1, 0, 0, 0, 0, ny),
			[]string{"2025-11-02 01:30 EDT", "2026-11-02 01:30 EST"}},
		{"yearly February 29th only in leap years", queue.Periodic{Spec: queue.Yearly(time.February, 29, 12, 0), Location: berlin},
			time.Date(2025, 1, 1, 0, 0, 0, 0, berlin),
			[]string{"2028-02-29 12:00 CET", "2032-02-29 12:00 CET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ticks(t, tc.p, tc.from, len(tc.want)))
		})
	}
	// A weekly tick is a week of local time apart: 167 hours across spring
	// forward, 169 across fall back.
	weekly := queue.Periodic{Spec: queue.Weekly(time.Sunday, 23, 0), Location: ny}
	for _, tc := range []struct {
		from time.Time
		gap  time.Duration
	}{
		{time.Date(2025, 3, 2, 23, 0, 0, 0, ny), 167 * time.Hour},
		{time.Date(2025, 10, 26, 23, 0, 0, 0, ny), 169 * time.Hour},
	} {
		next, err := weekly.Next(tc.from)
		require.NoError(t, err)
		require.Equal(t, tc.gap, next.Sub(tc.from), "after %v", tc.from)
		require.Equal(t, ny, next.Location())
	}
	_, err := queue.Periodic{Spec: queue.Cron("61 * * * *")}.Next(time.Now())
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

// scheduleEnv registers a per-minute schedule that creates two noop jobs a
// tick.
func scheduleEnv(t *testing.T, p queue.Periodic) *env {
	t.Helper()
	e := newEnv(t, basic(t))
	if p.Jobs == nil {
		p.Jobs = func(queue.Tick) []queue.Params { return []queue.Params{{Args: noop{}}, {Args: report{County: "x"}}} }
	}
	require.NoError(t, e.reg.Schedule(p))
	return e
}

var start = time.Date(2025, 12, 8, 22, 59, 30, 0, time.UTC)

// Three runners, each with its own pool and the same schedule, over thirty
// ticks: every tick's jobs are created exactly once.
func TestThreeRunnersCreateEachTickOnce(t *testing.T) {
	t.Parallel()
	const n = 30
	e := scheduleEnv(t, queue.Periodic{Name: "every-minute", Spec: queue.Cron("* * * * *"), Grace: time.Second})
	clock := newClock(start)
	for i := range 3 {
		c, err := queue.NewClient(ownPool(t, e), e.reg, quiet(), queue.WithObserver(e.events))
		require.NoError(t, err)
		r, err := queue.NewRunner(c, queue.WithClock(clock), queue.WithRunnerID(fmt.Sprint("sched-", i)), queue.WithWorkers(2))
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	}
	for k := 1; k <= n; k++ {
		<-clock.Waiting(3)
		clock.Set(start.Add(time.Duration(k) * time.Minute))
		e.events.Wait(t, queue.EventScheduled, 0, k)
	}
	require.Equal(t, int64(2*n), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
	require.Equal(t, int64(n), e.db.Count(t, "SELECT count(DISTINCT run_id) FROM sheaf_jobs"))
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM (SELECT run_id FROM sheaf_jobs GROUP BY run_id HAVING count(*) <> 2) d"))
	require.Equal(t, int64(2*n), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE period = '2025-12-08' OR period = '2025-12-09'"))
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE run_id = 'every-minute@2025-12-08T23:00:00Z'"+" AND kind = 'noop'"))
	// One ledger row per tick, with its jobs; late, as each fired 30
	// seconds after its time and the grace is a second.
	require.Equal(t, int64(n), e.db.Count(t, "SELECT count(*) FROM sheaf_ticks"))
	require.Equal(t, int64(n), e.db.Count(t, "SELECT count(*) FROM sheaf_ticks WHERE schedule = 'every-minute' AND outcome = 'late' AND jobs = 2"))
}

func TestMissedTicksPolicies(t *testing.T) {
	t.Parallel()
	for _, policy := range []queue.MissedPolicy{queue.SkipMissed, queue.RunMissedOnce} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			t.Parallel()
			e := scheduleEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *"), Missed: policy})
			// Every process was down since 20:00; it is now 22:59:30.
			require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)",
				time.Date(2025, 12, 8, 20, 0, 0, 0, time.UTC)).Error)
			clock := newClock(start)
			e.runner(t, queue.WithClock(clock))
			<-clock.Waiting(1)
			if policy == queue.RunMissedOnce {
				ev := e.events.Wait(t, queue.EventScheduled, 0, 1)[0]
				require.Equal(t, "hourly@2025-12-08T22:00:00Z", ev.RunID, "the latest missed tick, once")
			}
			clock.Set(start.Add(time.Minute)) // 23:00:30
			evs := e.events.Wait(t, queue.EventScheduled, 0, int(policy)+1)
			require.Equal(t, "hourly@2025-12-08T23:00:00Z", evs[len(evs)-1].RunID)
			want := map[queue.MissedPolicy]int64{queue.SkipMissed: 1, queue.RunMissedOnce: 2}[policy]
			require.Equal(t, want, e.db.Count(t, "SELECT count(DISTINCT run_id) FROM sheaf_jobs"))
		})
	}
}

// A schedule a runner has started but that has not fired yet has no last
// tick: ScheduleStates says since when it waits, then its first tick.
func TestScheduleStateBeforeAndAfterItsFirstTick(t *testing.T) {
	t.Parallel()
	e := scheduleEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *")})
	state := func() queue.ScheduleState {
		states, err := e.client.ScheduleStates(context.Background())
		require.NoError(t, err)
		require.Len(t, states, 1)
		return states[0]
	}
	st := state()
	require.True(t, st.LastTick.IsZero() && st.Started.IsZero(), "no runner has started it: %+v", st)
	clock := newClock(start) // 22:59:30
	e.runner(t, queue.WithClock(clock))
	<-clock.Waiting(1)
	st = state()
	require.True(t, st.LastTick.IsZero(), "last tick %v before the first", st.LastTick)
	require.True(t, st.Started.Equal(start), "started %v, want %v", st.Started, start)
	clock.Set(start.Add(time.Minute))
	e.events.Wait(t, queue.EventScheduled, 0, 1)
	st = state()
	require.True(t, st.LastTick.Equal(time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC)), "last tick %v", st.LastTick)
	require.True(t, st.Started.IsZero())
}

// A runner that starts just after a tick fell due, before the live runner
// that should fire it got round to it, fires it rather than skip it.
func TestARecentTickIsDueNotMissed(t *testing.T) {
	t.Parallel()
	e := scheduleEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *"), Missed: queue.SkipMissed})
	// 22:00 fired; it is 23:00:10 and nobody has fired 23:00 yet.
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)",
		time.Date(2025, 12, 8, 22, 0, 0, 0, time.UTC)).Error)
	clock := newClock(time.Date(2025, 12, 8, 23, 0, 10, 0, time.UTC))
	e.runner(t, queue.WithClock(clock))
	ev := e.events.Wait(t, queue.EventScheduled, 0, 1)[0]
	require.Equal(t, "hourly@2025-12-08T23:00:00Z", ev.RunID)
	require.Equal(t, int64(2), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE run_id = 'hourly@2025-12-08T23:00:00Z'"))
}

// A schedule replaced under the same name follows its new timetable at once.
func TestReplacedScheduleTakesItsNewTimetable(t *testing.T) {
	t.Parallel()
	e := scheduleEnv(t, queue.Periodic{Name: "a", Spec: queue.Cron("* * * * *"), Grace: time.Second})
	clock := newClock(start)
	e.runner(t, queue.WithClock(clock))
	<-clock.Waiting(1)
	clock.Set(start.Add(time.Minute)) // 23:00:30: the 23:00 tick
	e.events.Wait(t, queue.EventScheduled, 0, 1)
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "a", Spec: queue.Cron("*/5 * * * *"),
		Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: noop{}}} }}))
	<-clock.Waiting(2)                    // the old timetable's timer for 23:01, and the new one's
	clock.Set(start.Add(2 * time.Minute)) // 23:01:30: a tick of the old spec only
	clock.Set(start.Add(6 * time.Minute)) // 23:05:30
	ev := e.events.Wait(t, queue.EventScheduled, 0, 2)[1]
	require.Equal(t, "a@2025-12-08T23:05:00Z", ev.RunID, "no tick at 23:01")
	require.Equal(t, int64(3), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "two jobs at 23:00, one at 23:05")
}

func TestSchedulesChangeAtRunTime(t *testing.T) {
	t.Parallel()
	e := scheduleEnv(t, queue.Periodic{Name: "a", Spec: queue.Cron("* * * * *"), Grace: time.Second})
	clock := newClock(start)
	e.runner(t, queue.WithClock(clock))
	<-clock.Waiting(1)
	clock.Set(start.Add(time.Minute))
	e.events.Wait(t, queue.EventScheduled, 0, 1)
	require.True(t, e.reg.Unschedule("a"))
	require.False(t, e.reg.Unschedule("a"))
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "b", Spec: queue.Cron("*/2 * * * *"), Grace: time.Second,
		Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: noop{}}} }}))
	<-clock.Waiting(2)                    // a's old timer, and the one for b
	clock.Set(start.Add(3 * time.Minute)) // 23:02:30: b's first tick is 23:02
	ev := e.events.Wait(t, queue.EventScheduled, 0, 2)[1]
	require.Equal(t, "b", ev.Schedule)
	require.Equal(t, "b@2025-12-08T23:02:00Z", ev.RunID)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE run_id LIKE 'a@%' AND run_id <> 'a@2025-12-08T23:00:00Z'"),
		"the removed schedule fired no more")
	for name, p := range map[string]queue.Periodic{
		"no name": {Spec: queue.Cron("* * * * *"), Jobs: func(queue.Tick) []queue.Params { return nil }},
		"bad":     {Name: "x", Spec: queue.Cron("every day"), Jobs: func(queue.Tick) []queue.Params { return nil }},
		"no jobs": {Name: "x", Spec: queue.Cron("* * * * *")},
		"never":   {Name: "x", Spec: queue.Cron("0 0 30 2 *"), Jobs: func(queue.Tick) []queue.Params { return nil }},
		"no spec": {Name: "x", Jobs: func(queue.Tick) []queue.Params { return nil }},
		"zone":    {Name: "x", Spec: queue.Cron("CRON_TZ=Asia/Tokyo 0 23 * * *"), Jobs: func(queue.Tick) []queue.Params { return nil }},
	} {
		require.ErrorIs(t, e.reg.Schedule(p), queue.ErrInvalidOption, name)
	}
}

// Presets refuse arguments out of range themselves, in their own words,
// rather than leave a cron parser to fail on the expression they make.
func TestPresetsCheckTheirArguments(t *testing.T) {
	t.Parallel()
	r := queue.NewRegistry()
	jobs := func(queue.Tick) []queue.Params { return nil }
	for _, tc := range []struct {
		spec queue.Spec
		want string
	}{
		{queue.Daily(25, 0), "Daily(25, 0): hour 25 not in [0, 23]"},
		{queue.Daily(-1, 0), "Daily(-1, 0): hour -1 not in [0, 23]"},
		{queue.Daily(23, 60), "Daily(23, 60): minute 60 not in [0, 59]"},
		{queue.Weekly(7, 23, 0), "Weekly(7, 23, 0): weekday 7 not in [0, 6]"},
		{queue.Weekly(time.Monday, 24, 0), "Weekly(Monday, 24, 0): hour 24 not in [0, 23]"},
		{queue.Monthly(0, 23, 0), "Monthly(0, 23, 0): day 0 not in [1, 31]"},
		{queue.Monthly(32, 23, 0), "Monthly(32, 23, 0): day 32 not in [1, 31]"},
		{queue.Quarterly(1, 23, -5), "Quarterly(1, 23, -5): minute -5 not in [0, 59]"},
		{queue.Yearly(13, 1, 0, 0), "Yearly(13, 1, 0, 0): month 13 not in [1, 12]"},
		{queue.Yearly(time.February, 30, 23, 0), "Yearly(February, 30, 23, 0): day 30 not in [1, 29]"},
		{queue.Yearly(time.April, 31, 23, 0), "Yearly(April, 31, 23, 0): day 31 not in [1, 30]"},
		{queue.Cron("every day"), `Cron("every day"): expected exactly 5 fields, found 2: [every day]`},
	} {
		err := r.Schedule(queue.Periodic{Name: "x", Spec: tc.spec, Jobs: jobs})
		require.ErrorIs(t, err, queue.ErrInvalidOption)
		require.EqualError(t, err, `queue: invalid option: schedule "x": `+tc.want)
		_, err = queue.Periodic{Spec: tc.spec}.Next(time.Now())
		require.ErrorIs(t, err, queue.ErrInvalidOption)
	}
	for _, spec := range []queue.Spec{queue.Daily(0, 0), queue.Daily(23, 59), queue.Weekly(time.Saturday, 0, 0),
		queue.Monthly(31, 0, 0), queue.Quarterly(31, 0, 0), queue.Yearly(time.February, 29, 0, 0), queue.Cron("@daily")} {
		require.NoError(t, r.Schedule(queue.Periodic{Name: "x", Spec: spec, Jobs: jobs}), spec.String())
	}
	require.Equal(t, "30 23 * * 1", queue.Weekly(time.Monday, 23, 30).String())
}

func TestWindowOpen(t *testing.T) {
	t.Parallel()
	kolkata := mustLoad(t, "Asia/Kolkata")
	night, err := queue.DailyWindow("23:00", "05:00", kolkata)
	require.NoError(t, err)
	day, err := queue.DailyWindow("09:00", "17:30", nil)
	require.NoError(t, err)
	at := func(h, m int, loc *time.Location) time.Time { return time.Date(2025, 12, 8, h, m, 0, 0, loc) }
	for _, tc := range []struct {
		w    queue.Window
		t    time.Time
		open bool
	}{
		{night, at(22, 59, kolkata), false},
		{night, at(23, 0, kolkata), true},
		{night, at(0, 0, kolkata), true},
		{night, at(4, 59, kolkata), true},
		{night, at(5, 0, kolkata), false},
		{night, at(12, 0, kolkata), false},
		{night, at(18, 0, time.UTC), true}, // 23:30 in Kolkata
		{day, at(9, 0, time.UTC), true},
		{day, at(17, 29, time.UTC), true},
		{day, at(17, 30, time.UTC), false},
		{day, at(8, 59, time.UTC), false},
	} {
		require.Equal(t, tc.open, tc.w.Open(tc.t), "%v at %v", tc.w, tc.t)
	}
	always, err := queue.DailyWindow("00:00", "00:00", nil)
	require.NoError(t, err)
	require.True(t, always.Open(at(13, 0, time.UTC)))
	require.True(t, queue.Window{}.Open(time.Now()))
	require.Equal(t, "23:00-05:00 Asia/Kolkata", night.String())
	_, err = queue.DailyWindow("25:00", "05:00", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

type heavy struct{}

func (heavy) Kind() string { return "heavy" }

// A kind with a window stays QUEUED while the window is closed and runs once
// it opens; other kinds are not held up.
func TestKindWindow(t *testing.T) {
	t.Parallel()
	w, err := queue.DailyWindow("23:00", "05:00", nil)
	require.NoError(t, err)
	e := newEnv(t, func(r *queue.Registry) {
		basic(t)(r)
		require.NoError(t, queue.Register(r, nopHandler[heavy](), queue.During(w)))
	})
	clock := newClock(time.Date(2025, 12, 8, 22, 0, 0, 0, time.UTC))
	h := enqueue(t, e, heavy{})
	light := enqueue(t, e, noop{})
	// Polling once an hour: only the window's opening can wake the runner.
	e.runner(t, queue.WithClock(clock), queue.WithPollInterval(time.Hour))
	e.events.Wait(t, queue.EventCompleted, light, 1)
	require.Equal(t, queue.StatusQueued, e.status(t, h), "22:00 is outside 23:00-05:00")
	<-clock.Waiting(1) // the window's opening (no schedules here)
	clock.Set(time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC))
	e.events.Wait(t, queue.EventCompleted, h, 1)
}

// A queue with a window is not claimed from while it is closed.
func TestQueueWindow(t *testing.T) {
	t.Parallel()
	w, err := queue.DailyWindow("01:00", "02:00", nil)
	require.NoError(t, err)
	e := newEnv(t, basic(t))
	e.reg.QueueWindow("nightly", w)
	clock := newClock(time.Date(2025, 12, 8, 23, 30, 0, 0, time.UTC))
	in := enqueue(t, e, noop{}, queue.OnQueue("nightly"))
	out := enqueue(t, e, noop{})
	e.runner(t, queue.WithClock(clock), queue.WithQueues(queue.DefaultQueue, "nightly"))
	e.events.Wait(t, queue.EventCompleted, out, 1)
	require.Equal(t, queue.StatusQueued, e.status(t, in))
	clock.Set(time.Date(2025, 12, 9, 1, 0, 0, 0, time.UTC)) // the window crossed into the next day
	e.events.Wait(t, queue.EventCompleted, in, 1)
}

// A kind's window closing does not stop a job of the kind that is running:
// it runs to its end. A job of the kind enqueued after the close stays
// QUEUED, unclaimed, until the window opens again the next night.
func TestKindWindowClosesOnARunningJob(t *testing.T) {
	t.Parallel()
	berlin := mustLoad(t, "Europe/Berlin")
	w, err := queue.DailyWindow("23:00", "05:00", berlin)
	require.NoError(t, err)
	started := make(chan int64, 2)
	release := make(chan struct{})
	blockOnce := make(chan struct{}, 1) // only the first heavy job blocks
	blockOnce <- struct{}{}
	e := newEnv(t, func(r *queue.Registry) {
		basic(t)(r)
		require.NoError(t, queue.Register(r, queue.HandlerFunc[heavy](func(ctx context.Context, j *queue.Job[heavy]) error {
			started <- j.ID
			select {
			case <-blockOnce:
			default:
				return nil
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}), queue.During(w)))
	})
	clock := newClock(time.Date(2025, 12, 8, 23, 30, 0, 0, berlin)) // in the window
	e.runner(t, queue.WithClock(clock), queue.WithWorkers(2), queue.WithPollInterval(20*time.Millisecond))
	var once sync.Once
	releaseHeavy := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseHeavy) // runs before the runner's Stop, should the test fail midway

	first := enqueue(t, e, heavy{})
	e.events.Wait(t, queue.EventStarted, first, 1)
	require.Equal(t, first, <-started)

	clock.Set(time.Date(2025, 12, 9, 5, 30, 0, 0, berlin)) // 04:30 UTC: the window has closed
	// A claim that read the clock before it moved may still be under way.
	// The one that claims the barrier ran after the barrier was enqueued,
	// so every claim after it reads the moved clock.
	barrier := enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, barrier, 1)
	second := enqueue(t, e, heavy{})
	// The marker comes after the second in claim order: the claim that took
	// it passed over the second, whose kind is closed.
	marker := enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, marker, 1)
	rec, err := e.client.Get(context.Background(), second)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status, "05:30 is outside 23:00-05:00")
	require.Zero(t, rec.Attempts, "not claimed")
	require.Nil(t, rec.StartedAt)
	require.Equal(t, queue.StatusProcessing, e.status(t, first), "still running after the close")

	releaseHeavy()
	e.events.Wait(t, queue.EventCompleted, first, 1)
	rec, err = e.client.Get(context.Background(), first)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status, "a job running when the window closed finishes")
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventCompleted}, e.events.Of(first))
	// Its freed slot does not let the second in either.
	marker = enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, marker, 1)
	require.Equal(t, queue.StatusQueued, e.status(t, second))
	require.Empty(t, e.events.Of(second))

	clock.Set(time.Date(2025, 12, 9, 23, 0, 0, 0, berlin)) // the next night's window
	e.events.Wait(t, queue.EventCompleted, second, 1)
	require.Equal(t, second, <-started)
	rec, err = e.client.Get(context.Background(), second)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
}
