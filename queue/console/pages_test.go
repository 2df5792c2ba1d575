package console_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// page fetches a page of the dashboard and checks it is HTML, served
// with the headers every page has.
func (e *env) page(t *testing.T, path string, status int) string {
	t.Helper()
	res := e.do(t, "GET", path, "")
	require.Equal(t, status, res.status, "GET %s: %s", path, res.body)
	require.Equal(t, "text/html; charset=utf-8", res.header.Get("Content-Type"), path)
	require.Contains(t, res.header.Get("Content-Security-Policy"), "script-src 'self'", path)
	require.Contains(t, res.header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
	return string(res.body)
}

// setTime sets a time column of a job, as either store keeps times.
func (e *env) setTime(t *testing.T, id int64, column string, at time.Time) {
	t.Helper()
	var v any = at
	if pgtest.Store() == "sqlite" {
		v = at.UTC().Format(sqlitedb.TimeLayout)
	}
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET "+column+" = ? WHERE id = ?", v, id).Error)
	// Behind the queue's back: the counts a runner's roll-up may have kept
	// of the job's run (by kind, with first starts) are dropped, so that
	// they are read again from its jobs, as changed.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_runs SET counts = NULL WHERE run_id = (SELECT run_id FROM sheaf_jobs WHERE id = ?)", id).Error)
}

// actionsIn finds the action buttons of a page.
var actionsIn = regexp.MustCompile(`data-(post|bulk|match)="[^"]*"`)

func TestPagesShowTheQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	ok := e.enqueue(t, report{County: "Travis"}, queue.InRun("nightly@1"), queue.InPeriod("2025-12-08"))
	bad := e.enqueue(t, report{County: "El Paso", Fail: true}, queue.InRun("nightly@1"), queue.InPeriod("2025-12-08"))
	e.work(t, ok, bad)
	waiting := e.enqueue(t, report{County: "Harris"}, queue.RunAt(time.Now().Add(time.Hour)))

	overview := e.page(t, "/", http.StatusOK)
	require.Contains(t, overview, `<a href="jobs?queue=default">default</a>`)
	require.Regexp(t, `data-status="FAILED" data-label="FAILED"><a href="jobs\?queue=default&amp;status=FAILED">1</a>`, overview)
	require.Regexp(t, `data-status="COMPLETED" data-label="COMPLETED"><a href="jobs\?queue=default&amp;status=COMPLETED">1</a>`, overview)
	require.Contains(t, overview, `data-post="api/queues/default/pause"`)

	jobs := e.page(t, "/jobs?status=FAILED", http.StatusOK)
	require.Contains(t, jobs, fmt.Sprintf(`data-job="%d"`, bad))
	require.NotContains(t, jobs, fmt.Sprintf(`data-job="%d"`, ok))
	require.Contains(t, jobs, `id="retry-matching"`)
	require.NotContains(t, jobs, `id="cancel-matching"`, "no FAILED job can be cancelled")

	search := e.page(t, "/jobs?q=503+for+request", http.StatusOK)
	require.Contains(t, search, fmt.Sprintf(`data-job="%d"`, bad))
	require.NotContains(t, search, fmt.Sprintf(`data-job="%d"`, ok))
	require.NotContains(t, search, fmt.Sprintf(`data-job="%d"`, waiting))

	job := e.page(t, fmt.Sprintf("/jobs/%d", bad), http.StatusOK)
	require.Contains(t, job, `id="status">FAILED<`)
	require.Contains(t, job, `id="retry"`)
	require.NotContains(t, job, `id="cancel"`)
	require.Contains(t, job, "El Paso")
	require.Contains(t, job, `<a href="runs/nightly@1">nightly@1</a>`)

	queued := e.page(t, fmt.Sprintf("/jobs/%d", waiting), http.StatusOK)
	require.Contains(t, queued, `id="cancel"`)
	require.NotContains(t, queued, `id="retry"`)

	runs := e.page(t, "/runs?period=2025-12-08", http.StatusOK)
	require.Contains(t, runs, `data-run="nightly@1"`)
	run := e.page(t, "/runs/nightly@1", http.StatusOK)
	require.Contains(t, run, html.EscapeString("county El Paso: upstream returned <n> for request <hex>"), "the failure group")
	require.Contains(t, run, fmt.Sprintf(`<a href="jobs/%d">#%d report</a>`, bad, bad))
	require.Contains(t, run, `id="retry-run"`)

	e.page(t, "/schedules", http.StatusOK)
	e.do(t, "POST", "/api/queues/default/pause", "")
	audit := e.page(t, "/audit", http.StatusOK)
	require.Contains(t, audit, `<td data-label="Who">tester</td><td data-label="Did">pause</td>`)
	require.Contains(t, e.page(t, "/", http.StatusOK), `data-post="api/queues/default/resume"`)
}

func TestPagesOfAReadOnlyConsoleHaveNoActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.enqueue(t, report{County: "El Paso", Fail: true}, queue.InRun("r"))
	e.work(t, bad)
	for _, p := range []string{"/", "/jobs", "/jobs?status=FAILED", fmt.Sprintf("/jobs/%d", bad), "/runs/r"} {
		body := e.page(t, p, http.StatusOK)
		require.Empty(t, actionsIn.FindAllString(body, -1), p)
		require.Contains(t, body, "Read-only", p)
	}
	e.expectError(t, http.StatusForbidden, "forbidden", "POST", fmt.Sprintf("/api/jobs/%d/retry", bad), "")
}

func TestPagesUnderAPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", e.h))
	e.srv.Config.Handler = mux
	body := e.page(t, "/ops/", http.StatusOK)
	require.Contains(t, body, `<base href="/ops/">`)
	require.Contains(t, e.page(t, "/ops/jobs", http.StatusOK), `<base href="/ops/">`)
	res := e.do(t, "GET", "/ops/"+regexp.MustCompile(`assets/app\.js\?v=[0-9a-f]+`).FindString(body), "")
	require.Equal(t, http.StatusOK, res.status)
}

func TestPageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Contains(t, e.page(t, "/jobs/987654", http.StatusNotFound), `data-code="not_found"`)
	require.Contains(t, e.page(t, "/jobs/x", http.StatusBadRequest), `data-code="bad_request"`)
	require.Contains(t, e.page(t, "/nowhere", http.StatusNotFound), `data-code="no_page"`)
	require.Contains(t, e.page(t, "/jobs?status=LOST", http.StatusBadRequest), html.EscapeString(`"LOST" is not a status`))
	require.Contains(t, e.page(t, "/jobs?since=2025-12-08T10:00&tz=Mars/Olympus", http.StatusBadRequest), "not a time zone")
	require.Contains(t, e.page(t, "/jobs?limit=x", http.StatusBadRequest), "limit")

	refuse := newEnv(t, console.WithAuthorizer(func(*http.Request) (console.Access, error) {
		return console.Access{}, errors.New("who are you?")
	}))
	require.Contains(t, refuse.page(t, "/", http.StatusUnauthorized), "who are you?")
	blind := newEnv(t, console.WithAuthorizer(func(*http.Request) (console.Access, error) { return console.Access{}, nil }))
	require.Contains(t, blind.page(t, "/jobs", http.StatusForbidden), "may not read")
}

func TestJobsPageReadsTimesInTheViewersZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	early := e.enqueue(t, report{County: "Travis"})
	e.setTime(t, early, "created_at", time.Date(2025, 12, 8, 9, 30, 0, 0, time.UTC))
	late := e.enqueue(t, report{County: "Harris"})
	e.setTime(t, late, "created_at", time.Date(2025, 12, 8, 10, 30, 0, 0, time.UTC))
	// 11:00 in Paris is 10:00 UTC: between the two.
	body := e.page(t, "/jobs?since=2025-12-08T11:00&tz=Europe/Paris", http.StatusOK)
	require.Contains(t, body, fmt.Sprintf(`data-job="%d"`, late))
	require.NotContains(t, body, fmt.Sprintf(`data-job="%d"`, early))
	require.Contains(t, body, `value="2025-12-08T11:00"`, "the form keeps what was typed")
}

func TestAssets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := e.page(t, "/", http.StatusOK)
	for _, name := range []string{"app.js", "app.css"} {
		url := regexp.MustCompile(`assets/` + regexp.QuoteMeta(name) + `\?v=[0-9a-f]+`).FindString(body)
		require.NotEmpty(t, url, name)
		res := e.do(t, "GET", "/"+url, "")
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, res.header.Get("Cache-Control"), "immutable")
		stale := e.do(t, "GET", "/assets/"+name+"?v=old", "")
		require.Equal(t, "no-cache", stale.header.Get("Cache-Control"))
	}
	require.Equal(t, http.StatusNotFound, e.do(t, "GET", "/assets/secret.txt", "").status)
}

func TestCountJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 3 {
		e.enqueue(t, report{County: fmt.Sprint("c", i)}, queue.OnQueue("q1"))
	}
	e.enqueue(t, report{County: "other"})
	var out struct{ Count int64 }
	e.do(t, "GET", "/api/jobs/count?queue=q1&status=QUEUED", "").decode(t, &out)
	require.EqualValues(t, 3, out.Count)
	e.do(t, "GET", "/api/jobs/count?q=other", "").decode(t, &out)
	require.EqualValues(t, 1, out.Count)
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/jobs/count?cursor=x", "")
}

func TestBulkByFilterTakesItsStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	queued := e.enqueue(t, report{County: "a"}, queue.OnQueue("q1"))
	// A job taken by a runner, which does not work it: PROCESSING.
	claimed := e.enqueue(t, report{County: "b"}, queue.OnQueue("q1"))
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'PROCESSING', attempts = 1, claims = 1,
		locked_by = 'elsewhere' WHERE id = ?`, claimed).Error)
	e.setTime(t, claimed, "started_at", time.Now())
	e.setTime(t, claimed, "locked_until", time.Now().Add(time.Hour))
	var out struct{ Changed int64 }
	e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"queue":"q1","statuses":["QUEUED"]}}`).decode(t, &out)
	require.EqualValues(t, 1, out.Changed)
	for id, want := range map[int64]queue.Status{queued: queue.StatusCancelled, claimed: queue.StatusProcessing} {
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, rec.Status, "job %d", id)
	}
	e.do(t, "POST", "/api/jobs/retry", `{"filter":{"queue":"q1","statuses":["CANCELLED"]}}`).decode(t, &out)
	require.EqualValues(t, 0, out.Changed, "a bulk retry takes FAILED jobs")
	res := e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/cancel", `{"filter":{"queue":"q1","statuses":["GONE"]}}`)
	require.True(t, strings.Contains(string(res.body), "GONE"))
}
