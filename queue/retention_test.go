package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
)

func TestRetentionRefusesBadValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, c := range []struct {
		r     queue.Retention
		field string
	}{
		{queue.Retention{Completed: time.Minute}, "Completed"},
		{queue.Retention{Failed: -2}, "Failed"},
		{queue.Retention{History: time.Second}, "History"},
		{queue.Retention{HourlyHistory: time.Minute}, "HourlyHistory"},
		{queue.Retention{Alerts: 24 * time.Hour}, "Alerts"},
	} {
		_, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithRetention(c.r))
		var re *queue.RetentionError
		require.ErrorAs(t, err, &re, "%+v", c.r)
		require.ErrorIs(t, err, queue.ErrInvalidOption)
		require.Equal(t, c.field, re.Field)
		require.ErrorContains(t, err, "queue: retention: "+c.field)
	}
	_, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithRetention(queue.Retention{Completed: queue.KeepForever, Failed: queue.MinRetention}))
	require.NoError(t, err)

	for _, c := range []struct {
		r     queue.Retention
		field string
	}{
		{queue.Retention{History: 48 * time.Hour}, "History"},
		{queue.Retention{HourlyHistory: 48 * time.Hour}, "HourlyHistory"},
		{queue.Retention{Archive: func(context.Context, []queue.JobRecord) error { return nil }}, "Archive"},
		{queue.Retention{Cancelled: time.Nanosecond}, "Cancelled"},
		{queue.Retention{Alerts: queue.DefaultKeepAlerts}, "Alerts"},
	} {
		err := queue.Register(e.reg, nopHandler[noop](), queue.Retain(c.r))
		var re *queue.RetentionError
		require.ErrorAs(t, err, &re, "%+v", c.r)
		require.Equal(t, c.field, re.Field)
	}
}

// run calls a task until it says its round is over (it returns every),
// and fails the test on an error or if it never is.
func run(t *testing.T, task maintain.Task, every time.Duration) {
	t.Helper()
	for range 1000 {
		next, err := task.Run(context.Background())
		require.NoError(t, err, task.Name())
		if next == every {
			return
		}
	}
	t.Fatalf("%s never finished its round", task.Name())
}

// nightOf is the start of night n (1 is 2025-11-01) at 23:00 UTC.
func nightOf(n int) time.Time { return time.Date(2025, 11, n, 23, 0, 0, 0, time.UTC) }

// insertNight stores night n's county reports, finished, each taking took
// (slow, if not zero, the first of them); it returns their IDs.
func insertNight(t *testing.T, e *env, n, jobs int, took, slow time.Duration) []int64 {
	t.Helper()
	day := nightOf(n).Format("2006-01-02")
	ids := make([]int64, jobs)
	for i := range jobs {
		s := nightOf(n).Add(time.Duration(i) * time.Second)
		d := took
		if i == 0 && slow != 0 {
			d = slow
		}
		c := s.Add(d)
		ids[i] = insertJob(t, e, "county_daily", "COMPLETED", "nightly@"+day, day, 1, &s, &c, "")
	}
	return ids
}

// Thirty nights are rolled up, then pruned; on night 31 one report takes
// ten times as long, and the review flags it against nights 1 to 30,
// whose rows are gone.
func TestThirtyNightsOfHistoryOutliveTheirRows(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	for n := 1; n <= 30; n++ {
		insertNight(t, e, n, 3, time.Minute, 0)
	}
	// A failure on night 30 that operators still need: kept 30 days.
	s, c := nightOf(30).Add(30*time.Minute), nightOf(30).Add(30*time.Minute+time.Second)
	failed := insertJob(t, e, "county_weekly", "FAILED", "", "", 3, &s, &c, "upstream returned 503 for request 0x1f")
	client, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithRetention(queue.Retention{Completed: time.Hour, HourlyHistory: dayOfHours}))
	require.NoError(t, err)
	now := time.Date(2025, 12, 1, 6, 0, 0, 0, time.UTC)
	tasks := queue.Upkeep(client, func() time.Time { return now })
	rollup, hours, counts, prune := tasks[0], tasks[1], tasks[2], tasks[3]
	require.Equal(t, "rollup", rollup.Name())
	require.Equal(t, "hour rollup", hours.Name())
	require.Equal(t, "run counts", counts.Name())
	require.Equal(t, "prune", prune.Name())

	run(t, prune, maintain.PruneEvery)
	require.EqualValues(t, 91, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "nothing is pruned before it is rolled up")
	run(t, rollup, maintain.RollupEvery)
	run(t, rollup, maintain.RollupEvery) // again: the same rows
	run(t, hours, maintain.HoursEvery)
	run(t, counts, time.Minute)
	run(t, prune, maintain.PruneEvery)
	require.Equal(t, []int64{failed}, jobIDsOf(t, e, "SELECT id FROM sheaf_jobs"), "nights 1 to 30 are pruned; the failure stays")

	days, err := client.History(ctx, queue.HistoryQuery{Kind: "county_daily", From: nightOf(1), To: now})
	require.NoError(t, err)
	require.Len(t, days, 30)
	for i, d := range days {
		require.Equal(t, nightOf(i+1).Truncate(24*time.Hour), d.Day)
		require.Equal(t, queue.DayStats{Day: d.Day, Kind: "county_daily", Queue: queue.DefaultQueue, Completed: 3,
			P50: time.Minute, P95: time.Minute, Max: time.Minute}, d)
	}
	weekly, err := client.History(ctx, queue.HistoryQuery{Kind: "county_weekly", From: nightOf(1), To: now})
	require.NoError(t, err)
	require.Len(t, weekly, 1)
	require.Equal(t, map[string]int64{"upstream returned <n> for request <hex>": 1}, weekly[0].Errors)
	require.EqualValues(t, 1, weekly[0].Failed)
	require.EqualValues(t, 2, weekly[0].Retries)

	// Night 31, read from the jobs themselves: its day is not rolled up.
	slow := insertNight(t, e, 31, 3, time.Minute, 10*time.Minute)[0]
	today, err := client.History(ctx, queue.HistoryQuery{From: now, To: now.Add(48 * time.Hour)})
	require.NoError(t, err)
	require.Len(t, today, 1)
	require.EqualValues(t, 3, today[0].Completed)
	require.Equal(t, 10*time.Minute, today[0].Max)

	rv, err := client.Review(ctx, queue.ReviewQuery{Period: "2025-12-01"})
	require.NoError(t, err)
	require.Len(t, rv.Slow, 1)
	require.Equal(t, slow, rv.Slow[0].Job.ID)
	require.Equal(t, time.Minute, rv.Slow[0].Typical)
	// The earlier nights' jobs are pruned: the baseline is the day
	// roll-ups', and says over how many days.
	b := rv.Typical["county_daily"]
	require.Equal(t, time.Minute, b.Median)
	require.Equal(t, time.Minute, b.P95)
	require.Zero(t, b.Jobs)
	require.Equal(t, 20, b.Days, "the latest History days")
}

// dayOfHours is the hourly history of the tests that prune jobs finished
// a month or more ago, and read no hour roll-ups: the hour roll-up then
// makes 24 hours final rather than the default's 720, one transaction each.
const dayOfHours = 24 * time.Hour

// dayOfHoursClient is e's client with an hourly history of dayOfHours.
func dayOfHoursClient(t *testing.T, e *env) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithObserver(e.events),
		queue.WithRetention(queue.Retention{HourlyHistory: dayOfHours}))
	require.NoError(t, err)
	return c
}

func jobIDsOf(t *testing.T, e *env, query string) []int64 {
	t.Helper()
	var out []int64
	require.NoError(t, e.db.Gorm.Raw(query).Scan(&out).Error)
	return out
}

// A kind's own retention overrides the client's; an archive sees every job
// before it goes, and one that fails deletes nothing.
func TestRetainAndArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(reg *queue.Registry) {
		require.NoError(t, queue.Register(reg, nopHandler[noop](),
			queue.Retain(queue.Retention{Completed: queue.KeepForever})))
	})
	old := time.Date(2025, 11, 1, 1, 0, 0, 0, time.UTC)
	kept := insertJob(t, e, "noop", "COMPLETED", "", "", 1, &old, &old, "")
	gone := insertJob(t, e, "report", "COMPLETED", "", "", 1, &old, &old, "")
	var archived []queue.JobRecord
	fail := true
	client, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithRetention(queue.Retention{
		HourlyHistory: dayOfHours,
		Archive: func(_ context.Context, jobs []queue.JobRecord) error {
			if fail {
				return errors.New("bucket unreachable")
			}
			archived = append(archived, jobs...)
			return nil
		}}))
	require.NoError(t, err)
	now := time.Date(2025, 12, 1, 6, 0, 0, 0, time.UTC)
	tasks := queue.Upkeep(client, func() time.Time { return now })
	run(t, tasks[0], maintain.RollupEvery)
	run(t, tasks[1], maintain.HoursEvery)
	run(t, tasks[2], time.Minute)

	_, err = tasks[3].Run(context.Background())
	require.ErrorContains(t, err, "bucket unreachable")
	require.Equal(t, []int64{kept, gone}, jobIDsOf(t, e, "SELECT id FROM sheaf_jobs ORDER BY id"))

	fail = false
	run(t, tasks[3], maintain.PruneEvery)
	require.Equal(t, []int64{kept}, jobIDsOf(t, e, "SELECT id FROM sheaf_jobs ORDER BY id"))
	require.Len(t, archived, 1)
	require.Equal(t, gone, archived[0].ID)
	require.Equal(t, "report", archived[0].Kind)
}

func TestHistoryRefusesBadQueries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	now := time.Now()
	for _, q := range []queue.HistoryQuery{
		{},
		{From: now, To: now.Add(-time.Hour)},
		{From: now.AddDate(-20, 0, 0), To: now},
		{From: now.Add(-time.Hour), Kind: "a\x00b"},
	} {
		_, err := e.client.History(ctx, q)
		require.ErrorIs(t, err, queue.ErrInvalidOption, fmt.Sprintf("%+v", q))
	}
	days, err := e.client.History(ctx, queue.HistoryQuery{From: now.Add(-time.Hour)})
	require.NoError(t, err)
	require.Empty(t, days)
}

// Client.Prune rolls up and prunes at once, and says how many jobs went;
// a cancelled context stops it with its error.
func TestClientPrune(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.client = dayOfHoursClient(t, e)
	old := time.Now().AddDate(0, 0, -40)
	for range 3 {
		insertJob(t, e, "report", "COMPLETED", "", "", 1, &old, &old, "")
	}
	recent := time.Now().Add(-time.Minute)
	kept := insertJob(t, e, "report", "COMPLETED", "", "", 1, &recent, &recent, "")
	// Alert episodes that ended past DefaultKeepAlerts go, later ones stay.
	for i, ended := range []time.Time{time.Now().AddDate(0, 0, -100), time.Now().AddDate(0, 0, -80)} {
		require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_alert_episodes (rule, `+keyColumn()+`, state, started_at, resolved_at)
			VALUES ('dead', ?, 'resolved', ?, ?)`, fmt.Sprint(i), e.db.Time(ended), e.db.Time(ended)).Error)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.client.Prune(cancelled)
	require.ErrorIs(t, err, context.Canceled)

	n, err := e.client.Prune(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.Equal(t, []int64{kept}, jobIDsOf(t, e, "SELECT id FROM sheaf_jobs"))
	var keys []string
	require.NoError(t, e.db.Gorm.Raw("SELECT "+keyColumn()+" FROM sheaf_alert_episodes").Scan(&keys).Error)
	require.Equal(t, []string{"1"}, keys)
}

// Stats count the jobs that finished in today's final hours from the hour
// roll-ups, and only those of the hour under way from the jobs: the
// morning's stats do not read the night's jobs one by one.
func TestStatsCountTodaysFinalHoursFromTheirRollups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12*time.Hour + 30*time.Minute)
	night, late := now.Add(-10*time.Hour), now.Add(-20*time.Minute)
	var nightly []int64
	for range 3 {
		nightly = append(nightly, insertJob(t, e, "report", "COMPLETED", "", "", 1, &night, &night, ""))
	}
	nightly = append(nightly, insertJob(t, e, "report", "CANCELLED", "", "", 1, &night, &night, ""))
	insertJob(t, e, "report", "COMPLETED", "", "", 1, &late, &late, "")
	before := now.AddDate(0, 0, -2) // a day to roll up: days are final before today
	insertJob(t, e, "report", "COMPLETED", "", "", 1, &before, &before, "")
	client, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithRetention(queue.Retention{HourlyHistory: dayOfHours}))
	require.NoError(t, err)
	tasks := queue.Upkeep(client, func() time.Time { return now })
	run(t, tasks[0], maintain.RollupEvery)
	run(t, tasks[1], maintain.HoursEvery)
	want := map[queue.Status]int64{queue.StatusCompleted: 5, queue.StatusCancelled: 1}
	s, err := client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, s.ByKind["report"])

	// The night's rows gone, its hours still count them; the job of the
	// hour under way is counted where it is.
	require.NoError(t, e.db.Gorm.Exec("DELETE FROM sheaf_jobs WHERE id IN ?", nightly).Error)
	s, err = client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, s.ByKind["report"])
	qs, err := client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, want, qs[0].Counts)
	insertJob(t, e, "report", "FAILED", "", "", 1, &late, &late, "boom")
	s, err = client.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.ByKind["report"][queue.StatusFailed])
}
