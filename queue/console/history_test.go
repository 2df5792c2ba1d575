package console_test

import (
	"net/http"
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
