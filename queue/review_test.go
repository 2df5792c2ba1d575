package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// insertJob stores a job as a night left it, and returns its ID.
func insertJob(t *testing.T, e *env, kind, status, runID, period string, attempts int, started, completed *time.Time, lastErr string) int64 {
	t.Helper()
	var id int64
	var le, rid, per *string
	if lastErr != "" {
		le = &lastErr
	}
	if runID != "" {
		rid = &runID
	}
	if period != "" {
		per = &period
	}
	created := e.db.NullTime(started) // a job that never started was created now
	if started == nil {
		created = e.db.Time(e.db.Now(t))
	}
	require.NoError(t, e.db.Gorm.Raw(`INSERT INTO sheaf_jobs (kind, status, run_id, period, attempts, started_at, completed_at,
		last_error, created_at, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{"county":"x"}') RETURNING id`,
		kind, status, rid, per, attempts, e.db.NullTime(started), e.db.NullTime(completed), le, created).Scan(&id).Error)
	return id
}

func at(hour, minute, second int) *time.Time {
	t := time.Date(2025, 12, 8, hour, minute, second, 0, time.UTC)
	return &t
}

func TestMorningReview(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0),
		Jobs: func(queue.Tick) []queue.Params { return nil }}))
	ctx := context.Background()
	// History: twenty earlier county reports of 60s each.
	for i := range 20 {
		s := time.Date(2025, 12, 1, 23, 0, i, 0, time.UTC)
		c := s.Add(time.Minute)
		insertJob(t, e, "county_daily", "COMPLETED", "", "", 1, &s, &c, "")
	}
	// Later nights, much slower, are not the 8th's yardstick.
	for i := range 20 {
		s := time.Date(2025, 12, 10, 23, 0, i, 0, time.UTC)
		c := s.Add(10 * time.Minute)
		insertJob(t, e, "county_daily", "COMPLETED", "", "", 1, &s, &c, "")
	}
	run, period := "nightly@2025-12-08T23:00:00Z", "2025-12-08"
	ok := insertJob(t, e, "county_daily", "COMPLETED", run, period, 1, at(23, 0, 0), at(23, 1, 2), "")
	slow := insertJob(t, e, "county_daily", "COMPLETED", run, period, 2, at(23, 0, 0), at(23, 3, 20), "timeout")
	failed := insertJob(t, e, "county_daily", "FAILED", run, period, 3, at(23, 0, 5), at(23, 9, 0), "county Bexar: source unavailable")
	never := insertJob(t, e, "county_daily", "QUEUED", run, period, 0, nil, nil, "")
	insertJob(t, e, "weekly", "COMPLETED", run, period, 1, at(23, 0, 0), at(23, 0, 30), "")
	monthly := insertJob(t, e, "monthly", "CANCELLED", run, period, 1, at(23, 0, 0), at(23, 0, 10), "")
	// The children the completed county reports released.
	for _, parent := range []int64{ok, slow} {
		require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_jobs (kind, status, run_id, period, idempotency_key, parent_ids)
			VALUES ('summary', 'COMPLETED', ?, ?, ?, ?)`, run, period, "sheaf-dep:county-summary:job:"+strconv.FormatInt(parent, 10), queue.IDs{parent}).Error)
	}

	rv, err := e.client.Review(ctx, queue.ReviewQuery{RunID: run})
	require.NoError(t, err)
	require.Equal(t, int64(8), rv.Total)
	require.Equal(t, map[queue.Status]int64{
		queue.StatusCompleted: 5, queue.StatusFailed: 1, queue.StatusQueued: 1, queue.StatusCancelled: 1,
	}, rv.Counts)
	require.Len(t, rv.Failed, 1)
	require.Equal(t, failed, rv.Failed[0].ID)
	require.Equal(t, 3, rv.Failed[0].Attempts)
	require.Equal(t, "county Bexar: source unavailable", *rv.Failed[0].LastError)
	require.Len(t, rv.Slow, 1, "62s is ordinary, 200s is not")
	require.Equal(t, slow, rv.Slow[0].Job.ID)
	require.Equal(t, 200*time.Second, rv.Slow[0].Duration)
	require.Equal(t, time.Minute, rv.Slow[0].Typical, "the median of the twenty earlier runs")
	require.Len(t, rv.NeverRan, 1)
	require.Equal(t, never, rv.NeverRan[0].ID)
	require.Empty(t, rv.MissedTicks, "the run's tick made jobs")
	require.Len(t, rv.Stopped, 3)
	byRule := map[string][]queue.StoppedChain{}
	for _, sc := range rv.Stopped {
		byRule[sc.Rule] = append(byRule[sc.Rule], sc)
	}
	require.Len(t, byRule["consolidated"], 1)
	require.Equal(t, "2025-12-08", byRule["consolidated"][0].Group)
	require.Equal(t, monthly, byRule["consolidated"][0].Blocking[0].ID, "the cancelled monthly stopped the consolidated report")
	summaries := byRule["county-summary"]
	require.Len(t, summaries, 2, "the failed and the never-run county reports released no summary")
	blocked := []int64{summaries[0].Blocking[0].ID, summaries[1].Blocking[0].ID}
	require.ElementsMatch(t, []int64{failed, never}, blocked)
	require.ElementsMatch(t, []string{fmt.Sprint("job:", failed), fmt.Sprint("job:", never)},
		[]string{summaries[0].Group, summaries[1].Group}, "a one-to-one chain is named by its parent")

	// A range over three nights: the 7th had no run at all.
	rv, err = e.client.Review(ctx, queue.ReviewQuery{
		From: time.Date(2025, 12, 6, 12, 0, 0, 0, time.UTC), To: time.Date(2025, 12, 9, 12, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	var missed []string
	for _, tk := range rv.MissedTicks {
		missed = append(missed, tk.RunID)
	}
	require.Equal(t, []string{"nightly@2025-12-06T23:00:00Z", "nightly@2025-12-07T23:00:00Z"}, missed)
	rv, err = e.client.Review(ctx, queue.ReviewQuery{RunID: "nightly@2025-12-07T23:00:00Z"})
	require.NoError(t, err)
	require.Zero(t, rv.Total)
	require.Len(t, rv.MissedTicks, 1, "reviewing a run that never happened says so")

	// The night as a whole: every job of the period, whatever its run.
	insertJob(t, e, "weekly", "COMPLETED", "weekly@2025-12-08T23:00:00Z", period, 1, at(23, 0, 0), at(23, 0, 5), "")
	rv, err = e.client.Review(ctx, queue.ReviewQuery{Period: period})
	require.NoError(t, err)
	require.Equal(t, int64(9), rv.Total)
	require.Empty(t, rv.MissedTicks, "the nightly schedule's tick of the 8th made jobs")
	_, err = e.client.Review(ctx, queue.ReviewQuery{Period: period, RunID: run})
	require.ErrorIs(t, err, queue.ErrInvalidOption)

	// The selective retry of the run's failed jobs, in one call.
	n, err := e.client.RetryFailed(ctx, queue.Filter{RunID: run})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, queue.StatusQueued, e.status(t, failed))

	_, err = e.client.Review(ctx, queue.ReviewQuery{})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

// A night with more failures, slow jobs and unstarted jobs than a review
// lists: the lists stop at the limit and say how many more there are, and
// the failure groups count every failed job, merging errors that differ
// only in numbers.
func TestReviewBoundsItsLists(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	for i := range 5 {
		s := time.Date(2025, 12, 1, 23, 0, i, 0, time.UTC)
		c := s.Add(time.Second)
		insertJob(t, e, "weekly", "COMPLETED", "", "", 1, &s, &c, "")
	}
	run, period := "nightly@2025-12-08T23:00:00Z", "2025-12-08"
	var failed, slow, never []int64
	for i := range 7 {
		failed = append(failed, insertJob(t, e, "county_daily", "FAILED", run, period, 3, at(23, 0, i), at(23, 1, i),
			fmt.Sprintf("county %d: upstream returned 503", i)))
	}
	failed = append(failed, insertJob(t, e, "monthly", "FAILED", run, period, 3, at(23, 0, 0), at(23, 1, 0), "disk full"))
	for i := range 6 {
		slow = append(slow, insertJob(t, e, "weekly", "COMPLETED", run, period, 1, at(23, 0, i), at(23, 0, 10+i), ""))
		insertJob(t, e, "weekly", "COMPLETED", run, period, 1, at(23, 1, i), at(23, 1, i+1), "")
		never = append(never, insertJob(t, e, "weekly", "QUEUED", run, period, 0, nil, nil, ""))
	}

	rv, err := e.client.Review(ctx, queue.ReviewQuery{RunID: run, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, int64(26), rv.Total)
	require.Equal(t, int64(8), rv.Counts[queue.StatusFailed])
	require.Equal(t, failed[:3], recordIDs(rv.Failed), "the oldest first")
	require.Equal(t, int64(5), rv.MoreFailed)
	require.Equal(t, []queue.FailureGroup{
		{Error: "county <n>: upstream returned <n>", Count: 7, Kinds: []string{"county_daily"}, JobIDs: failed[:7]},
		{Error: "disk full", Count: 1, Kinds: []string{"monthly"}, JobIDs: failed[7:]},
	}, rv.Failures)
	slowIDs := make([]int64, len(rv.Slow))
	for i, s := range rv.Slow {
		slowIDs[i] = s.Job.ID
		require.Equal(t, time.Second, s.Typical)
		require.GreaterOrEqual(t, s.Duration, 10*time.Second)
	}
	require.Equal(t, slow[:3], slowIDs, "a second is usual; ten or more are not")
	require.Equal(t, int64(3), rv.MoreSlow)
	require.Equal(t, never[:3], recordIDs(rv.NeverRan))
	require.Equal(t, int64(3), rv.MoreNeverRan)

	rv, err = e.client.Review(ctx, queue.ReviewQuery{RunID: run})
	require.NoError(t, err)
	require.Len(t, rv.Failed, 8)
	require.Zero(t, rv.MoreFailed+rv.MoreSlow+rv.MoreNeverRan)

	for _, limit := range []int{-1, 10_001} {
		_, err = e.client.Review(ctx, queue.ReviewQuery{RunID: run, Limit: limit})
		require.ErrorIs(t, err, queue.ErrInvalidOption)
	}
}

func recordIDs(jobs []queue.JobRecord) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// A review's baseline of a kind is the median and 95th percentile of its
// earlier jobs' run times, interpolated as PostgreSQL's percentile_cont
// does on every store, and says how many jobs it was taken over.
func TestReviewBaselineHasItsPercentiles(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	// Ten earlier reports of 1 to 10 minutes, finished in that order.
	for i := range 10 {
		s := time.Date(2025, 12, 1, 23, i, 0, 0, time.UTC)
		c := s.Add(time.Duration(i+1) * time.Minute)
		insertJob(t, e, "county_daily", "COMPLETED", "", "", 1, &s, &c, "")
	}
	run := "nightly@2025-12-08T23:00:00Z"
	slow := insertJob(t, e, "county_daily", "COMPLETED", run, "2025-12-08", 1, at(23, 0, 0), at(23, 20, 0), "")
	ctx := context.Background()

	rv, err := e.client.Review(ctx, queue.ReviewQuery{RunID: run})
	require.NoError(t, err)
	// Sorted, 1..10 min: the median halfway between 5 and 6, the 95th
	// percentile 0.55 of the way from 9 to 10 (at 0.95 × 9 = 8.55).
	want := queue.Baseline{Median: 5*time.Minute + 30*time.Second, P95: 9*time.Minute + 33*time.Second, Jobs: 10}
	require.Equal(t, want, rv.Typical["county_daily"])
	require.Len(t, rv.Slow, 1)
	require.Equal(t, slow, rv.Slow[0].Job.ID)
	require.Equal(t, want.Median, rv.Slow[0].Typical)
	require.Equal(t, want.P95, rv.Slow[0].P95)

	// The latest four: 7 to 10 minutes.
	rv, err = e.client.Review(ctx, queue.ReviewQuery{RunID: run, History: 4})
	require.NoError(t, err)
	require.Equal(t, queue.Baseline{Median: 8*time.Minute + 30*time.Second, P95: 9*time.Minute + 51*time.Second, Jobs: 4},
		rv.Typical["county_daily"])
}

// A finished night's slow jobs are found as the maintenance keeps its
// counts (by a review it makes then) and kept with them: reviews with the
// same thresholds read them there, not from the night's jobs; other
// thresholds, or a night whose counts are no longer kept, are read from
// the jobs.
func TestReviewKeepsAFinishedNightsSlowJobs(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	for n := 1; n <= 5; n++ {
		insertNight(t, e, n, 3, time.Minute, 0)
	}
	ids := insertNight(t, e, 6, 3, time.Minute, 10*time.Minute)
	night := "nightly@" + nightOf(6).Format("2006-01-02")
	if e.db.Count(t, "SELECT count(*) FROM sheaf_runs") == 0 { // as an enqueue records it (SQLite's trigger did)
		require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_runs (run_id, period, first_created) VALUES (?, ?, ?)",
			night, nightOf(6).Format("2006-01-02"), e.db.Time(nightOf(6))).Error)
	}
	client, err := queue.NewClient(e.db.Gorm, e.reg, quiet())
	require.NoError(t, err)
	counts := queue.Upkeep(client, time.Now)[2]
	require.Equal(t, "run counts", counts.Name())
	run(t, counts, time.Minute)
	var kept int64
	require.NoError(t, e.db.Gorm.Raw("SELECT count(*) FROM sheaf_runs WHERE run_id = ? AND slow IS NOT NULL", night).Scan(&kept).Error)
	require.EqualValues(t, 1, kept, "kept before anyone asks")

	slowIDs := func(q queue.ReviewQuery) []int64 {
		t.Helper()
		rv, err := client.Review(ctx, q)
		require.NoError(t, err)
		var out []int64
		for _, s := range rv.Slow {
			out = append(out, s.Job.ID)
		}
		return out
	}
	// A finished job does not change; were one to, only a review that
	// reads the jobs would see it.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET completed_at = ? WHERE id = ?",
		e.db.Time(nightOf(6).Add(time.Second+20*time.Minute)), ids[1]).Error)
	require.Equal(t, []int64{ids[0]}, slowIDs(queue.ReviewQuery{RunID: night}), "kept with the night's counts")
	require.Equal(t, []int64{ids[0]}, slowIDs(queue.ReviewQuery{RunID: night, Limit: 1}), "a shorter page of it")
	require.Equal(t, []int64{ids[0], ids[1]}, slowIDs(queue.ReviewQuery{RunID: night, SlowFactor: 2}), "other thresholds")

	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_runs SET counts = NULL WHERE run_id = ?", night).Error) // as a retry does
	require.Equal(t, []int64{ids[0], ids[1]}, slowIDs(queue.ReviewQuery{RunID: night}), "a run going again is read from its jobs")
}
