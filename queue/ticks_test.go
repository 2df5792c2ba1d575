package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// clockedEnv is scheduleEnv with a client on clock, whose runners go by the
// same clock unless given their own.
func clockedEnv(t *testing.T, p queue.Periodic, clock queue.Clock) (*env, *queue.Client) {
	t.Helper()
	e := scheduleEnv(t, p)
	c, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithObserver(e.events), queue.WithClock(clock))
	require.NoError(t, err)
	return e, c
}

// ledger returns the ledger's records of every schedule, newest first.
func ledger(t *testing.T, c *queue.Client) []queue.TickRecord {
	t.Helper()
	recs, err := c.Ticks(context.Background(), queue.TicksQuery{})
	require.NoError(t, err)
	return recs
}

func state(t *testing.T, c *queue.Client) queue.ScheduleState {
	t.Helper()
	states, err := c.ScheduleStates(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	return states[0]
}

func dec8(h, m, s int) time.Time { return time.Date(2025, 12, 8, h, m, s, 0, time.UTC) }

// Deploy night: the first runner of a brand-new nightly schedule starts at
// 23:00:05, five seconds after its tick. The tick is due, not missed: it
// fires, on time, and the ledger, the schedule's state and the review say
// so. The next night's tick fires on time too.
func TestFirstStartFiresATickWithinTheGrace(t *testing.T) {
	t.Parallel()
	clock := newClock(dec8(23, 0, 5))
	e, c := clockedEnv(t, queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0)}, clock)
	// Rows older than 400 days, as if the name had served before: the
	// schedule's own are pruned as it fires, another's are left.
	old := dec8(23, 0, 0).AddDate(0, 0, -401)
	for _, name := range []string{"nightly", "other"} {
		require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_ticks (schedule, at, outcome, recorded_at, run_id) VALUES (?, ?, 'missed', ?, ?)",
			name, e.db.Time(old), e.db.Time(old), name+"@old").Error)
	}
	queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond)) // the client's clock
	ev := e.events.Wait(t, queue.EventScheduled, 0, 1)[0]
	require.Equal(t, "nightly@2025-12-08T23:00:00Z", ev.RunID)
	require.Equal(t, 2, ev.Jobs)

	recs := ledger(t, c)
	require.Len(t, recs, 2)
	require.Equal(t, "other@old", recs[1].RunID, "the old row of nightly was pruned, other's left")
	require.Equal(t, queue.TickFired, recs[0].Outcome)
	require.True(t, recs[0].At.Equal(dec8(23, 0, 0)))
	require.True(t, recs[0].RecordedAt.Equal(dec8(23, 0, 5)), "recorded %v by the runner's clock", recs[0].RecordedAt)
	require.Equal(t, "nightly@2025-12-08T23:00:00Z", recs[0].RunID)
	require.Equal(t, 2, recs[0].Jobs)

	st := state(t, c)
	require.True(t, st.LastTick.Equal(dec8(23, 0, 0)), "last tick %v", st.LastTick)
	require.Equal(t, "nightly@2025-12-08T23:00:00Z", st.LastRunID)
	require.Equal(t, 2, st.LastJobs)
	require.Equal(t, queue.TickFired, st.LastOutcome)
	require.Zero(t, st.MissedTicks)
	require.True(t, st.Started.IsZero())

	rv, err := c.Review(context.Background(), queue.ReviewQuery{Period: "2025-12-08"})
	require.NoError(t, err)
	require.Empty(t, rv.MissedTicks)

	<-clock.Waiting(1)
	clock.Set(dec8(23, 0, 40).AddDate(0, 0, 1))
	e.events.Wait(t, queue.EventScheduled, 0, 2)
	recs = ledger(t, c)
	require.Len(t, recs, 3)
	require.Equal(t, "nightly@2025-12-09T23:00:00Z", recs[0].RunID, "newest first")
	require.Equal(t, queue.TickFired, recs[0].Outcome, "40 seconds after its time is within the grace")
}

// A tick older than the grace on a first start is not the schedule's: it
// did not exist then. The runner waits for the next.
func TestFirstStartLeavesATickOlderThanTheGrace(t *testing.T) {
	t.Parallel()
	clock := newClock(dec8(23, 0, 5))
	e, c := clockedEnv(t, queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0), Grace: 3 * time.Second}, clock)
	queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond))
	<-clock.Waiting(1)
	require.Empty(t, ledger(t, c))
	st := state(t, c)
	require.True(t, st.Started.Equal(dec8(23, 0, 5)), "started %v", st.Started)
	require.Zero(t, st.MissedTicks, "a tick before the start is not missed")
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// Every process was down from 17:00's tick to 22:59:30. A schedule that
// catches up three ticks fires 20:00, 21:00 and 22:00, oldest first and
// late, and records 18:00 and 19:00 as missed, in the ledger that the
// review and the schedule's state read. 23:00 then fires on time.
func TestCatchUpFiresTheLatestMissedTicksAndRecordsTheOthers(t *testing.T) {
	t.Parallel()
	clock := newClock(start)
	e, c := clockedEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *"), Missed: queue.CatchUp(3)}, clock)
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)", e.db.Time(dec8(17, 0, 0))).Error)
	queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond))
	evs := e.events.Wait(t, queue.EventScheduled, 0, 3)
	require.Equal(t, []string{"hourly@2025-12-08T20:00:00Z", "hourly@2025-12-08T21:00:00Z", "hourly@2025-12-08T22:00:00Z"},
		[]string{evs[0].RunID, evs[1].RunID, evs[2].RunID}, "oldest first")

	type row struct {
		RunID   string
		Outcome queue.TickOutcome
		Jobs    int
	}
	var got []row
	for _, r := range ledger(t, c) {
		got = append(got, row{r.RunID, r.Outcome, r.Jobs})
	}
	require.Equal(t, []row{
		{"hourly@2025-12-08T22:00:00Z", queue.TickLate, 2},
		{"hourly@2025-12-08T21:00:00Z", queue.TickLate, 2},
		{"hourly@2025-12-08T20:00:00Z", queue.TickLate, 2},
		{"hourly@2025-12-08T19:00:00Z", queue.TickMissed, 0},
		{"hourly@2025-12-08T18:00:00Z", queue.TickMissed, 0},
	}, got)
	require.Equal(t, int64(6), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))

	missed, err := c.Ticks(context.Background(), queue.TicksQuery{Schedule: "hourly", Outcome: queue.TickMissed, Limit: 1})
	require.NoError(t, err)
	require.Len(t, missed, 1)
	require.Equal(t, "hourly@2025-12-08T19:00:00Z", missed[0].RunID)
	missed, err = c.Ticks(context.Background(), queue.TicksQuery{Outcome: queue.TickMissed, After: &missed[0]})
	require.NoError(t, err)
	require.Len(t, missed, 1, "the next page")
	require.Equal(t, "hourly@2025-12-08T18:00:00Z", missed[0].RunID)

	rv, err := c.Review(context.Background(), queue.ReviewQuery{From: dec8(17, 30, 0), To: dec8(23, 30, 0)})
	require.NoError(t, err)
	require.Len(t, rv.MissedTicks, 2, "the review reads the ledger; 23:00 is not due yet")
	require.Equal(t, "hourly@2025-12-08T18:00:00Z", rv.MissedTicks[0].RunID)
	require.Equal(t, "hourly@2025-12-08T19:00:00Z", rv.MissedTicks[1].RunID)

	st := state(t, c)
	require.True(t, st.LastTick.Equal(dec8(22, 0, 0)))
	require.Equal(t, queue.TickLate, st.LastOutcome)
	require.Zero(t, st.MissedTicks, "nothing missed since the last tick")

	<-clock.Waiting(1)
	clock.Set(start.Add(time.Minute)) // 23:00:30
	e.events.Wait(t, queue.EventScheduled, 0, 4)
	require.Equal(t, queue.TickFired, ledger(t, c)[0].Outcome)
}

// A schedule that skips missed ticks records each in the ledger, creates
// nothing for them, and counts them as missed until it fires again; the
// review lists them, and the ticks no runner has reached yet.
func TestSkipRecordsMissedTicks(t *testing.T) {
	t.Parallel()
	clock := newClock(start) // 22:59:30
	e, c := clockedEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *")}, clock)
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)", e.db.Time(dec8(20, 0, 0))).Error)

	st := state(t, c)
	require.True(t, st.LastTick.Equal(dec8(20, 0, 0)), "a tick fired before the ledger: %v", st.LastTick)
	require.Equal(t, 2, st.MissedTicks, "no runner has reached 21:00 and 22:00 yet")
	require.True(t, st.LatestMissed.Equal(dec8(22, 0, 0)))
	rv, err := c.Review(context.Background(), queue.ReviewQuery{Period: "2025-12-08"})
	require.NoError(t, err)
	require.Len(t, rv.MissedTicks, 23, "every tick of the day due by now: none created a job")

	queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond))
	<-clock.Waiting(1)
	recs := ledger(t, c)
	require.Len(t, recs, 2)
	for i, want := range []time.Time{dec8(22, 0, 0), dec8(21, 0, 0)} {
		require.True(t, recs[i].At.Equal(want), "%v", recs[i].At)
		require.Equal(t, queue.TickMissed, recs[i].Outcome)
		require.Zero(t, recs[i].Jobs)
		require.True(t, recs[i].RecordedAt.Equal(start))
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
	st = state(t, c)
	require.True(t, st.LastTick.IsZero(), "the ledger knows no fired tick, and 22:00 was skipped, not fired: %v", st.LastTick)
	require.Equal(t, 2, st.MissedTicks)
	require.True(t, st.LatestMissed.Equal(dec8(22, 0, 0)))
	rv, err = c.Review(context.Background(), queue.ReviewQuery{RunID: "hourly@2025-12-08T21:00:00Z"})
	require.NoError(t, err)
	require.Len(t, rv.MissedTicks, 1)

	clock.Set(start.Add(time.Minute))
	e.events.Wait(t, queue.EventScheduled, 0, 1)
	st = state(t, c)
	require.True(t, st.LastTick.Equal(dec8(23, 0, 0)))
	require.Zero(t, st.MissedTicks)
}

// Bad policies, graces and ledger queries are refused with
// ErrInvalidOption, saying what is wrong.
func TestSchedulePolicyAndTicksQueryChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	jobs := func(queue.Tick) []queue.Params { return nil }
	for name, c := range map[string]struct {
		p    queue.Periodic
		want string
	}{
		"negative":     {queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Missed: queue.CatchUp(-1)}, "missed-tick policy -1 not in [0, 1000]"},
		"too many":     {queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Missed: queue.CatchUp(queue.MaxCatchUp + 1)}, "not in [0, 1000]"},
		"short grace":  {queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Grace: time.Millisecond}, "grace 1ms not in [1s, 24h]"},
		"long grace":   {queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Grace: 25 * time.Hour}, "grace 25h0m0s not in [1s, 24h]"},
		"negative grc": {queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Grace: -time.Second}, "not in [1s, 24h]"},
	} {
		err := e.reg.Schedule(c.p)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
		require.ErrorContains(t, err, c.want, name)
	}
	require.Empty(t, e.reg.Schedules(), "nothing refused was registered")
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "x", Spec: queue.Daily(1, 0), Jobs: jobs, Missed: queue.CatchUp(queue.MaxCatchUp), Grace: 24 * time.Hour}))
	require.Equal(t, queue.RunMissedOnce, queue.CatchUp(1))
	require.Equal(t, queue.SkipMissed, queue.CatchUp(0))

	ctx := context.Background()
	for name, q := range map[string]queue.TicksQuery{
		"limit":    {Limit: -1},
		"big":      {Limit: 10_001},
		"outcome":  {Outcome: "lost"},
		"after":    {After: &queue.TickRecord{}},
		"schedule": {Schedule: "a\x00b"},
	} {
		_, err := e.client.Ticks(ctx, q)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
	}
	_, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithClock(nil))
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

// Two runners that start together after an outage, each on its own pool,
// catch the schedule up once between them: one ledger row per tick, and
// one set of jobs per tick caught up.
func TestTwoRunnersCatchUpOnce(t *testing.T) {
	t.Parallel()
	clock := newClock(start) // 22:59:30
	e := scheduleEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *"), Missed: queue.CatchUp(2)})
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)", e.db.Time(dec8(17, 0, 0))).Error)
	var c *queue.Client
	for range 2 {
		var err error
		c, err = queue.NewClient(ownPool(t, e), e.reg, quiet(), queue.WithObserver(e.events), queue.WithClock(clock))
		require.NoError(t, err)
		queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond), queue.WithWorkers(2))
	}
	<-clock.Waiting(2) // both have started the schedule and caught it up
	e.events.Wait(t, queue.EventScheduled, 0, 2)
	outcomes := map[queue.TickOutcome][]string{}
	for _, r := range ledger(t, c) {
		outcomes[r.Outcome] = append(outcomes[r.Outcome], r.RunID)
	}
	require.Equal(t, map[queue.TickOutcome][]string{
		queue.TickLate:   {"hourly@2025-12-08T22:00:00Z", "hourly@2025-12-08T21:00:00Z"},
		queue.TickMissed: {"hourly@2025-12-08T20:00:00Z", "hourly@2025-12-08T19:00:00Z", "hourly@2025-12-08T18:00:00Z"},
	}, outcomes)
	require.Equal(t, int64(4), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "two jobs for each tick caught up, once")
}

// A runner that cannot write the ledger as it starts a schedule (here, the
// table is out of the way) loses nothing: it logs the failure, starts
// nothing, and tries again at its next poll; then the missed ticks are
// recorded and the next tick fires, once the ledger is back.
func TestStartingAScheduleIsRetriedWhenTheDatabaseFails(t *testing.T) {
	t.Parallel()
	clock := newClock(start) // 22:59:30
	e := scheduleEnv(t, queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *")})
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES ('hourly', ?)", e.db.Time(dec8(20, 0, 0))).Error)
	require.NoError(t, e.db.Gorm.Exec("ALTER TABLE sheaf_ticks RENAME TO sheaf_ticks_away").Error)
	var log logged
	c, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithLogger(log.logger()), queue.WithObserver(e.events), queue.WithClock(clock))
	require.NoError(t, err)
	queuetest.StartRunner(t, c, queue.WithPollInterval(50*time.Millisecond))
	<-clock.Waiting(1) // the retry's timer, a poll away
	require.Contains(t, log.String(), "queue: could not start schedule; will try again")

	require.NoError(t, e.db.Gorm.Exec("ALTER TABLE sheaf_ticks_away RENAME TO sheaf_ticks").Error)
	clock.Set(start.Add(time.Second))
	<-clock.Waiting(1) // started: waiting for 23:00
	recs := ledger(t, c)
	require.Len(t, recs, 2, "21:00 and 22:00 recorded as missed")
	require.Equal(t, queue.TickMissed, recs[0].Outcome)
	clock.Set(start.Add(time.Minute))
	require.Equal(t, "hourly@2025-12-08T23:00:00Z", e.events.Wait(t, queue.EventScheduled, 0, 1)[0].RunID)
	require.Equal(t, 1, strings.Count(log.String(), "could not start schedule"), "one failure, one retry")
}
