package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// GET /api/history counts today's finished jobs from the jobs themselves,
// failures grouped by the shape of their error, and the overview charts
// the days.
func TestHistoryCountsTodaysJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := []int64{e.enqueue(t, report{County: "Travis"}), e.enqueue(t, report{County: "Harris"}),
		e.enqueue(t, report{County: "Bexar", Fail: true}), e.enqueue(t, report{County: "Dallas", Fail: true})}
	e.work(t, ids...)

	res := e.do(t, "GET", "/api/history?kind=report", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var got struct {
		Days []struct {
			Day                          string
			Kind, Queue                  string
			Completed, Failed, Cancelled int64
			P50Seconds                   float64 `json:"p50_seconds"`
			MaxSeconds                   float64 `json:"max_seconds"`
			Errors                       map[string]int64
		}
	}
	res.decode(t, &got)
	require.Len(t, got.Days, 1, "body: %s", res.body)
	d := got.Days[0]
	require.Equal(t, time.Now().UTC().Format(time.DateOnly), d.Day)
	require.Equal(t, "report", d.Kind)
	require.EqualValues(t, 2, d.Completed)
	require.EqualValues(t, 2, d.Failed)
	require.GreaterOrEqual(t, d.MaxSeconds, d.P50Seconds)
	require.Len(t, d.Errors, 2, "two counties, two shapes: %v", d.Errors)
	for shape, n := range d.Errors {
		require.True(t, strings.HasSuffix(shape, "upstream returned <n> for request <hex>"), shape)
		require.EqualValues(t, 1, n)
	}

	res = e.do(t, "GET", "/api/history?kind=nothing", "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"days": []}`, string(res.body))
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/history?from=yesterday", "")
	e.expectError(t, http.StatusBadRequest, "invalid_option", "GET", "/api/history?from=2025-12-08T00:00:00Z&to=2025-12-01T00:00:00Z", "")

	page := e.do(t, "GET", "/", "")
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, string(page.body), "Jobs finished per day, last 28 days (UTC)")
}

// The overview's chart of the last day, by the hour, draws the same once
// the hours are rolled up and their jobs are gone.
func TestDayChartOutlivesTheJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if d := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); d < 30*time.Second {
		time.Sleep(d) // the wall clock, not another goroutine: the charts' hours must not turn during the test
	}
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	for h := range 4 {
		for i := range h + 1 {
			done := base.Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Minute)
			started, status := done.Add(-time.Duration(i+1)*time.Second), "COMPLETED"
			if i == 1 {
				status = "FAILED"
			}
			var id int64
			require.NoError(t, e.db.Gorm.Raw(`INSERT INTO sheaf_jobs (kind, status, attempts, run_at, created_at, started_at, completed_at)
				VALUES ('report', ?, 1, ?, ?, ?, ?) RETURNING id`, status, e.db.Time(started.Add(-time.Duration(h+1)*time.Second)),
				e.db.Time(started), e.db.Time(started), e.db.Time(done)).Scan(&id).Error)
			if status == "FAILED" {
				require.NoError(t, e.db.Gorm.Exec(`INSERT INTO sheaf_attempts (job_id, claim, started_at, finished_at, outcome)
					VALUES (?, 1, ?, ?, 'failed')`, id, e.db.Time(started), e.db.Time(done)).Error)
			}
		}
	}
	chart := regexp.MustCompile(`(?s)<svg class="chart"[^>]*aria-label="(Jobs finished per hour|Wait and run time), last day".*?</svg>`)
	charts := func() []string {
		page := e.do(t, "GET", "/", "")
		require.Equal(t, http.StatusOK, page.status)
		return chart.FindAllString(string(page.body), -1)
	}
	before := charts()
	require.Len(t, before, 2)

	_, err := e.client.Prune(ctx) // rolls the hours up; the default retention keeps the jobs
	require.NoError(t, err)
	require.NoError(t, e.db.Gorm.Exec("DELETE FROM sheaf_attempts").Error)
	require.NoError(t, e.db.Gorm.Exec("DELETE FROM sheaf_jobs").Error)
	require.Equal(t, before, charts())
	require.NoError(t, e.db.Gorm.Exec("DELETE FROM sheaf_hours").Error)
	require.NotEqual(t, before, charts(), "without the roll-ups, the hours are blank")
}
