package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

func TestRunsAndReview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := "nightly@2025-12-08T23:00:00+05:30"
	in := []queue.EnqueueOption{queue.InRun(run), queue.InPeriod("2025-12-08")}
	ok := e.enqueue(t, report{County: "A"}, in...)
	f1 := e.enqueue(t, report{County: "B", Fail: true}, in...)
	f2 := e.enqueue(t, report{County: "C", Fail: true}, in...)
	e.work(t, ok, f1, f2)
	time.Sleep(5 * time.Millisecond)
	later := e.enqueue(t, report{County: "D"}, queue.InRun("other@1"))

	var runs struct {
		Runs []struct {
			RunID  string           `json:"run_id"`
			Period string           `json:"period"`
			Total  int64            `json:"total"`
			Counts map[string]int64 `json:"counts"`
		} `json:"runs"`
		NextCursor string `json:"next_cursor"`
	}
	res := e.do(t, "GET", "/api/runs", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &runs)
	require.Len(t, runs.Runs, 2)
	require.Equal(t, "other@1", runs.Runs[0].RunID, "newest first")
	require.Equal(t, run, runs.Runs[1].RunID)
	require.Equal(t, "2025-12-08", runs.Runs[1].Period)
	require.Equal(t, int64(3), runs.Runs[1].Total)
	require.Equal(t, map[string]int64{"COMPLETED": 1, "FAILED": 2}, runs.Runs[1].Counts)

	res = e.do(t, "GET", "/api/runs?limit=1", "")
	res.decode(t, &runs)
	require.Len(t, runs.Runs, 1)
	require.NotEmpty(t, runs.NextCursor)
	res = e.do(t, "GET", "/api/runs?limit=1&cursor="+runs.NextCursor, "")
	runs.NextCursor = ""
	res.decode(t, &runs)
	require.Equal(t, run, runs.Runs[0].RunID)
	require.Empty(t, runs.NextCursor)
	res = e.do(t, "GET", "/api/runs?period=2025-12-08", "")
	res.decode(t, &runs)
	require.Len(t, runs.Runs, 1)
	rec, err := e.client.Get(context.Background(), later)
	require.NoError(t, err)
	res = e.do(t, "GET", "/api/runs?since="+url.QueryEscape(rec.CreatedAt.Format(time.RFC3339Nano)), "")
	res.decode(t, &runs)
	require.Len(t, runs.Runs, 1)
	require.Equal(t, "other@1", runs.Runs[0].RunID)
	for q, param := range map[string]string{"limit=0": "limit", "since=x": "since", "until=x": "until",
		"cursor=e30": "cursor", "cursor=!": "cursor", "run=x": "run"} {
		res := e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs?"+q, "")
		require.Equal(t, param, res.json(t)["error"].(map[string]any)["param"], q)
	}

	var rv struct {
		Review struct {
			RunID    string           `json:"run_id"`
			Total    int64            `json:"total"`
			Counts   map[string]int64 `json:"counts"`
			Failed   []map[string]any `json:"failed"`
			Failures []struct {
				Message      string   `json:"message"`
				Count        int      `json:"count"`
				Kinds        []string `json:"kinds"`
				ExampleJobID int64    `json:"example_job_id"`
			} `json:"failure_groups"`
			Slow        []any `json:"slow"`
			NeverRan    []any `json:"never_ran"`
			MissedTicks []any `json:"missed_ticks"`
			Stopped     []any `json:"stopped"`
			MoreFailed  int64 `json:"more_failed"`
		} `json:"review"`
	}
	res = e.do(t, "GET", "/api/runs/"+url.PathEscape(run)+"/review?slow_factor=2&history=5", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &rv)
	require.Equal(t, run, rv.Review.RunID)
	require.Equal(t, int64(3), rv.Review.Total)
	require.Len(t, rv.Review.Failed, 2)
	require.Len(t, rv.Review.Failures, 2, "the counties differ, so the messages do")
	for _, g := range rv.Review.Failures {
		require.Equal(t, 1, g.Count)
		require.Equal(t, []string{"report"}, g.Kinds)
		require.Contains(t, []int64{f1, f2}, g.ExampleJobID)
		require.Contains(t, g.Message, "upstream returned <n> for request <hex>")
	}
	require.NotNil(t, rv.Review.Slow)
	require.NotNil(t, rv.Review.MissedTicks)
	require.NotNil(t, rv.Review.Stopped)
	require.NotNil(t, rv.Review.NeverRan)
	require.Zero(t, rv.Review.MoreFailed)

	// With a limit of one job a list, the second failed job is counted,
	// not listed.
	res = e.do(t, "GET", "/api/runs/"+url.PathEscape(run)+"/review?limit=1", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &rv)
	require.Len(t, rv.Review.Failed, 1)
	require.Equal(t, int64(1), rv.Review.MoreFailed)

	e.expectError(t, http.StatusNotFound, "not_found", "GET", "/api/runs/none@1/review", "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs/x/review?slow_factor=0.5", "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs/x/review?history=0", "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs/x/review?limit=0", "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs/x/review?limit=10001", "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runs/%ff/review", "")
}

func TestSchedulesStatsHealthKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "county-daily", Spec: queue.Daily(23, 0), Location: kolkata,
		Missed: queue.RunMissedOnce, Jobs: func(queue.Tick) []queue.Params { return nil }}))
	type scheduleView struct {
		Name, Expression, Zone string
		MissedPolicy           string     `json:"missed_policy"`
		LastTick               *time.Time `json:"last_tick"`
		Started                *time.Time `json:"started"`
		Missed                 int
		MissedLatest           *time.Time `json:"missed_latest"`
		Next                   []string
	}
	var sc struct{ Schedules []scheduleView }
	res := e.do(t, "GET", "/api/schedules", "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &sc)
	require.Len(t, sc.Schedules, 1)
	s := sc.Schedules[0]
	require.Equal(t, "county-daily", s.Name)
	require.Equal(t, "0 23 * * *", s.Expression)
	require.Equal(t, "Asia/Kolkata", s.Zone)
	require.Equal(t, "run_once", s.MissedPolicy)
	require.Nil(t, s.LastTick, "no runner has started the schedule")
	require.Nil(t, s.Started)
	require.Zero(t, s.Missed)
	require.Len(t, s.Next, 5)

	// A runner that starts the schedule stores the time it counts ticks
	// from, which is not a tick: no last tick, but since when it waits.
	started := time.Now().Add(-time.Hour).Truncate(time.Minute).Add(17 * time.Second)
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick, updated_at) VALUES (?, ?, ?)",
		"county-daily", e.db.Time(started), e.db.Time(started)).Error)
	sc.Schedules = nil
	e.do(t, "GET", "/api/schedules", "").decode(t, &sc)
	s = sc.Schedules[0]
	require.Nil(t, s.LastTick, "where a schedule starts counting is not a tick")
	require.NotNil(t, s.Started)
	require.True(t, s.Started.Equal(started), "started %v, want %v", s.Started, started)
	page := e.do(t, "GET", "/schedules", "")
	require.Contains(t, string(page.body), "none yet; started")
	require.NoError(t, e.db.Gorm.Exec("DELETE FROM sheaf_schedules").Error)

	// The schedule last fired three nights ago: the two nights since are
	// missed, the latest of them last night at 23:00 in Kolkata.
	now := time.Now().In(kolkata)
	lastNight := time.Date(now.Year(), now.Month(), now.Day(), 23, 0, 0, 0, kolkata)
	if lastNight.After(now.Add(-time.Minute)) {
		lastNight = lastNight.AddDate(0, 0, -1)
	}
	fired := lastNight.AddDate(0, 0, -2)
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick, updated_at) VALUES (?, ?, ?)",
		"county-daily", e.db.Time(fired), e.db.Time(fired)).Error)
	sc.Schedules = nil
	e.do(t, "GET", "/api/schedules", "").decode(t, &sc)
	s = sc.Schedules[0]
	require.NotNil(t, s.LastTick)
	require.True(t, s.LastTick.Equal(fired), "last tick %v, want %v", s.LastTick, fired)
	require.Equal(t, 2, s.Missed)
	require.NotNil(t, s.MissedLatest)
	require.True(t, s.MissedLatest.Equal(lastNight), "latest missed %v, want %v", s.MissedLatest, lastNight)
	var prev time.Time
	for _, n := range s.Next {
		at, err := time.Parse(time.RFC3339, n)
		require.NoError(t, err)
		require.Contains(t, n, "T23:00:00+05:30", "ticks are shown in the schedule's zone")
		require.True(t, at.After(prev))
		prev = at
	}

	e.enqueue(t, report{County: "A"})
	var st struct {
		ByStatus map[string]int64            `json:"by_status"`
		ByKind   map[string]map[string]int64 `json:"by_kind"`
		Ready    int64                       `json:"ready"`
	}
	res = e.do(t, "GET", "/api/stats", "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &st)
	require.Equal(t, map[string]int64{"QUEUED": 1}, st.ByStatus)
	require.Equal(t, int64(1), st.ByKind["report"]["QUEUED"])
	require.Equal(t, int64(1), st.Ready)

	res = e.do(t, "GET", "/api/health", "")
	require.Equal(t, http.StatusOK, res.status)
	h := res.json(t)
	require.Equal(t, "ok", h["status"])
	require.Equal(t, true, h["database"].(map[string]any)["reachable"])

	res = e.do(t, "GET", "/api/kinds", "")
	require.Equal(t, []any{"report"}, res.json(t)["kinds"])

	require.NoError(t, e.db.SQL.Close()) // the database goes away
	res = e.do(t, "GET", "/api/health", "")
	require.Equal(t, http.StatusServiceUnavailable, res.status)
	h = res.json(t)
	require.Equal(t, "unavailable", h["status"])
	require.Equal(t, false, h["database"].(map[string]any)["reachable"])
	e.expectError(t, http.StatusInternalServerError, "internal", "GET", "/api/stats", "")
}

// TestReviewSaysWhyJobsWait: the review says why each job that never ran
// waits.
func TestReviewSaysWhyJobsWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	closed, err := queue.DailyWindow(now.Add(2*time.Hour).Format("15:04"), now.Add(3*time.Hour).Format("15:04"), time.UTC)
	require.NoError(t, err)
	e.reg.QueueWindow("night", closed)
	require.NoError(t, e.client.PauseQueue(ctx, "held"))
	run := queue.InRun("wait@1")
	later := e.enqueue(t, report{County: "A"}, run, queue.RunAt(now.Add(time.Hour)))
	held := e.enqueue(t, report{County: "B"}, run, queue.OnQueue("held"))
	night := e.enqueue(t, report{County: "C"}, run, queue.OnQueue("night"))
	due := e.enqueue(t, report{County: "D"}, run)
	require.NoError(t, e.client.SetLimit(ctx, queue.Limit{Scope: queue.ScopeQueue, Target: "capped", Concurrency: 1}))
	busy := e.enqueue(t, report{County: "E"}, queue.OnQueue("capped"))
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'PROCESSING', locked_until = run_at WHERE id = ?", busy).Error)
	capped := e.enqueue(t, report{County: "F"}, run, queue.OnQueue("capped"))

	var rv struct {
		Review struct {
			Waiting []struct {
				JobID   int64 `json:"job_id"`
				Reasons []struct {
					Code   string `json:"code"`
					Detail string `json:"detail"`
				} `json:"reasons"`
			} `json:"waiting"`
		} `json:"review"`
	}
	res := e.do(t, "GET", "/api/runs/wait@1/review", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &rv)
	got := map[int64][]string{}
	for _, w := range rv.Review.Waiting {
		for _, r := range w.Reasons {
			got[w.JobID] = append(got[w.JobID], r.Code)
			require.NotEmpty(t, r.Detail)
		}
	}
	require.Equal(t, map[int64][]string{later: {"scheduled_later"}, held: {"queue_paused"}, night: {"window_closed"}, due: {"due"},
		capped: {"limit_reached"}}, got)
}

// A review reads a bounded number of distinct errors (2,000 error and
// kind pairs); the failures past them fold into one "(other)" group,
// which the page offers to open among the run's failed jobs, with no
// retry button (it names no job) and no search (it names no error).
func TestReviewFoldsTheRestIntoOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run, n = "nightly@2025-12-08", 2003
	jobs := make([]queue.Params, n)
	for i := range jobs {
		jobs[i] = queue.Params{Args: report{County: strconv.Itoa(i)}, Options: []queue.EnqueueOption{queue.InRun(run)}}
	}
	made, err := e.client.EnqueueBulk(context.Background(), jobs)
	require.NoError(t, err)
	require.EqualValues(t, n, made)
	// Every job failed with an error of its own; the numbers make them
	// one shape, "feed <n> is offline", once the database has grouped
	// them by their text.
	// MariaDB reads || as OR, not as concatenation.
	lastError := `'feed ' || id || ' is offline'`
	if e.db.Gorm.Dialector.Name() == "mysql" {
		lastError = `CONCAT('feed ', id, ' is offline')`
	}
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'FAILED', attempts = 1, claims = 1,
		started_at = created_at, completed_at = created_at, last_error = `+lastError).Error)

	var got struct {
		Review struct {
			Counts   map[string]int64 `json:"counts"`
			Failures []struct {
				Message string  `json:"message"`
				Count   int     `json:"count"`
				JobIDs  []int64 `json:"job_ids"`
			} `json:"failure_groups"`
		} `json:"review"`
	}
	res := e.do(t, "GET", "/api/runs/"+url.PathEscape(run)+"/review", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &got)
	rv := got.Review
	require.EqualValues(t, n, rv.Counts["FAILED"])
	require.Len(t, rv.Failures, 2, "%s", res.body)
	require.Equal(t, "feed <n> is offline", rv.Failures[0].Message)
	require.Equal(t, 2000, rv.Failures[0].Count)
	require.NotEmpty(t, rv.Failures[0].JobIDs)
	require.Equal(t, "(other)", rv.Failures[1].Message)
	require.Equal(t, n-2000, rv.Failures[1].Count, "the groups add up to the failed jobs")
	require.Empty(t, rv.Failures[1].JobIDs)

	page := e.page(t, "/runs/"+url.PathEscape(run), http.StatusOK)
	groups := regexp.MustCompile(`(?s)<details class="group".*?</details>`).FindAllString(page, -1)
	require.Len(t, groups, 2)
	require.Contains(t, groups[0], `class="retry-group"`)
	other := groups[1]
	require.Contains(t, other, `<span class="count">3</span>`)
	require.Contains(t, other, "past the groups the review reads")
	require.NotContains(t, other, "retry-group", "nothing to retry by ID")
	require.Contains(t, other, `href="jobs?run=`+url.QueryEscape(run)+`&amp;status=FAILED"`, "opened among the run's failed jobs, without a search")
	require.NotContains(t, other, "more</a>")
}
