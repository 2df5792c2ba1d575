package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// The overview leads with the latest run of each schedule, against the
// one before it, ahead of the counts per queue.
func TestOverviewLeadsWithLastNight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const before, last = "nightly@2025-12-07T23:00:00Z", "nightly@2025-12-08T23:00:00Z"
	// Two nights before those: 5 jobs of which 1 failed, and 4 jobs.
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("n5-", i), Fail: i == 0}, queue.InRun("nightly@2025-12-05T23:00:00Z")))
	}
	for i := range 4 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("n6-", i)}, queue.InRun("nightly@2025-12-06T23:00:00Z")))
	}
	for i := range 3 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("prev", i)}, queue.InRun(before), queue.InPeriod("2025-12-07")))
	}
	e.work(t, ids...)
	ids = ids[:0]
	for i := range 2 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("ok", i)}, queue.InRun(last), queue.InPeriod("2025-12-08")))
	}
	ids = append(ids, e.enqueue(t, report{County: "El Paso", Fail: true}, queue.InRun(last), queue.InPeriod("2025-12-08")))
	e.work(t, ids...)
	// A run of another schedule, still going.
	e.enqueue(t, report{County: "later"}, queue.InRun("hourly@2025-12-09T08:00:00Z"), queue.RunAt(time.Now().Add(time.Hour)))

	body := e.page(t, "/", http.StatusOK)
	night, counts := strings.Index(body, `id="night"`), strings.Index(body, `id="counts"`)
	require.True(t, night > 0 && night < counts, "last night comes before the counts")
	section := body[night:counts]
	require.Contains(t, section, `data-schedule="nightly" data-run="`+last+`"`)
	require.Contains(t, section, `data-schedule="hourly"`)
	require.Regexp(t, `data-schedule="nightly"[^>]*>\s*<h3>.*data-verdict>needs a look<`, section)
	require.Regexp(t, `data-schedule="hourly"[^>]*>\s*<h3>.*data-verdict>still running<`, section)
	require.Contains(t, section, `data-fact="failed">1 failed</a>`)
	require.Contains(t, section, "3 jobs,")
	require.Contains(t, section, ">1 failure group</a>")
	require.Contains(t, section, `<a href="runs/`+before+`">`+before+`</a>`, "the run before, linked")
	require.Contains(t, section, "3 completed, 0 failed.")
	// The usual night of the schedule: the medians of 3, 4 and 5 jobs,
	// of 3, 4 and 4 completed, of 0, 0 and 1 failed.
	require.Contains(t, section, "<p class=\"note\" data-usual>Usually (the median of its 3 runs before): 4 jobs, 4 completed, 0 failed.</p>")
	require.Equal(t, 1, strings.Count(section, "data-usual"), "not for hourly, which has no run before")
	require.Contains(t, section, "No earlier run of hourly")
	require.Regexp(t, `started <time datetime="[^"]+" data-rel title="[^"]+ UTC">(just now|\d+ (min|h|days) ago)</time>`, section)

	empty := newEnv(t)
	require.Contains(t, empty.page(t, "/", http.StatusOK), "No schedule has run yet.")
}

// setWaiting makes job id a QUEUED job after attempts failed attempts,
// due in, as a retry's backoff leaves it.
func (e *env) setWaiting(t *testing.T, id int64, attempts int, in time.Duration) {
	t.Helper()
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'QUEUED', attempts = ?, claims = ?,
		last_error = 'upstream timed out after 30s' WHERE id = ?`, attempts, attempts, id).Error)
	e.setTime(t, id, "run_at", time.Now().Add(in))
}

// A job waiting for its retry says so, and when, and can be run now; the
// list of jobs shows when each is due.
func TestWaitingJobIsExplained(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "Collin"}, queue.InRun("nightly@1"))
	e.setWaiting(t, id, 1, 57*time.Minute+30*time.Second)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	max := rec.MaxAttempts

	job := e.page(t, fmt.Sprintf("/jobs/%d", id), http.StatusOK)
	require.Regexp(t, fmt.Sprintf(`id="wait">Retry <time [^>]*data-rel[^>]*>in 57 min</time> \(attempt 2 of %d\)`, max), job)
	require.Contains(t, job, fmt.Sprintf("1 of %d attempts used", max))
	require.Contains(t, job, `id="run-now"`)
	require.Contains(t, job, ">Retry now</button>")

	// The overview does not read the waiting job as overdue, nor as nothing.
	overview := regexp.MustCompile(`(?s)<tr data-queue="default">.*?</tr>`).FindString(e.page(t, "/", http.StatusOK))
	require.Contains(t, overview, `data-label="Oldest due"><span class="hint" data-none-due>none due now</span></td>`)

	list := e.page(t, "/jobs", http.StatusOK)
	row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr data-job="%d">.*?</tr>`, id)).FindString(list)
	require.Regexp(t, fmt.Sprintf(`data-col="due" data-label="Due"><time [^>]*>in 57 min</time> <span class="hint">retry, attempt 2 of %d</span>`, max), row)
	require.Contains(t, row, `data-col="run" data-label="Run"><a href="runs/nightly@1">nightly@1</a>`)

	later := e.enqueue(t, report{County: "Dallas"}, queue.RunAt(time.Now().Add(5*time.Hour)))
	require.Regexp(t, `id="wait">Due <time [^>]*>in 5 h</time>, at <time`, e.page(t, fmt.Sprintf("/jobs/%d", later), http.StatusOK))
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", later), http.StatusOK), ">Run now</button>")

	// Run now: due at once, attempts kept, and in the audit log.
	res := e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/run", id), "")
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	rec, err = e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.False(t, rec.RunAt.After(time.Now()), "due now")
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, max, rec.MaxAttempts)
	job = e.page(t, fmt.Sprintf("/jobs/%d", id), http.StatusOK)
	require.Contains(t, job, "waiting for a runner of queue default to take it")
	require.NotContains(t, job, `id="run-now"`, "nothing to bring forward")
	entries, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)
	require.Equal(t, "run_now", entries[0].Action)
	require.JSONEq(t, fmt.Sprintf(`{"job":%d}`, id), string(entries[0].Target))
	require.EqualValues(t, 1, entries[0].Changed)

	done := e.enqueue(t, report{County: "Travis"})
	e.work(t, done)
	// A paused queue says so.
	require.NoError(t, e.client.PauseQueue(context.Background(), "default"))
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", later), http.StatusOK), "Queue default is paused")
	e.expectError(t, http.StatusConflict, "wrong_status", "POST", fmt.Sprintf("/api/jobs/%d/run", done), "")
	e.expectError(t, http.StatusNotFound, "not_found", "POST", "/api/jobs/987654/run", "")
	readOnly := newEnv(t)
	readOnly.expectError(t, http.StatusForbidden, "forbidden", "POST", fmt.Sprintf("/api/jobs/%d/run", id), "")
}

// A job finished for good says how it ended, not "attempt 1 of 3"; its
// Retry button says beforehand what a retry does to its attempt limit.
func TestFinishedJobSaysHowItEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	bad := e.enqueue(t, report{County: "El Paso", Fail: true})
	ok := e.enqueue(t, report{County: "Travis"})
	e.work(t, bad, ok)
	rec, err := e.client.Get(context.Background(), bad)
	require.NoError(t, err)

	failed := e.page(t, fmt.Sprintf("/jobs/%d", bad), http.StatusOK)
	require.Contains(t, failed, `id="attempt-line">failed for good after 1 attempt (a permanent error, not retried)</span>`)
	require.Contains(t, failed, fmt.Sprintf("A retry raises its attempt limit from %d to %d", rec.MaxAttempts, rec.MaxAttempts+1))
	require.Contains(t, failed, fmt.Sprintf("attempt 2 of %d", rec.MaxAttempts+1))
	require.NotContains(t, failed, `id="wait"`)
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", ok), http.StatusOK), `id="attempt-line">completed at attempt 1</span>`)

	limit := rec.MaxAttempts + 1
	require.Equal(t, http.StatusOK, e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/retry", bad), "").status)
	rec, err = e.client.Get(context.Background(), bad)
	require.NoError(t, err)
	require.Equal(t, limit, rec.MaxAttempts, "as the page said")
}

// The review gives each failure group its actions and facts, tags what
// an error is known to mean, lists the jobs waiting for a retry, states
// the slow check's baseline, and answers an unknown run with 404.
func TestReviewPageActsOnGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run = "nightly@2025-12-08T23:00:00Z"
	a := e.enqueue(t, report{County: "1", Fail: true}, queue.InRun(run))
	b := e.enqueue(t, report{County: "2", Fail: true}, queue.InRun(run))
	ok := e.enqueue(t, report{County: "Travis"}, queue.InRun(run))
	e.work(t, a, b, ok)
	waiting := e.enqueue(t, report{County: "Collin"}, queue.InRun(run))
	e.setWaiting(t, waiting, 1, 57*time.Minute+30*time.Second)
	rec, err := e.client.Get(context.Background(), waiting)
	require.NoError(t, err)

	page := e.page(t, "/runs/"+run, http.StatusOK)
	group := regexp.MustCompile(`(?s)<details class="group" open data-group="0">.*?</details>`).FindString(page)
	require.NotEmpty(t, group)
	require.Contains(t, group, `<span class="count">2</span>`)
	require.Contains(t, group, `data-tag="permanent">permanent</span> county &lt;n&gt;: upstream returned`)
	require.Contains(t, group, fmt.Sprintf(`data-body="{&#34;ids&#34;:[%d,%d]}"`, a, b))
	require.Contains(t, group, ">Retry these 2</button>")
	require.Contains(t, group, `data-confirm="Retry these 2 failed jobs?"`)
	require.Contains(t, group, "2 attempts in all; first failed <time")
	require.Contains(t, group, `href="jobs?q=%3A&#43;upstream&#43;returned&amp;run=nightly%402025-12-08T23%3A00%3A00Z&amp;status=FAILED">Open in Jobs</a>`)
	// The link finds the group's jobs.
	list := e.page(t, "/jobs?q=%3A+upstream+returned&run="+url.QueryEscape(run)+"&status=FAILED", http.StatusOK)
	require.Contains(t, list, fmt.Sprintf(`data-job="%d"`, a))
	require.Contains(t, list, fmt.Sprintf(`data-job="%d"`, b))
	require.Contains(t, page, `>Retry the 2 failed jobs of this run</button>`)

	retrying := regexp.MustCompile(`(?s)<section aria-labelledby="retrying-h".*?</section>`).FindString(page)
	require.Regexp(t, fmt.Sprintf(`data-job="%d">.*retry <time [^>]*>in 57 min</time> \(attempt 2 of %d\), after <span class="err"><span class="badge tag" data-tag="timeout">timed out</span> upstream timed out after 30s`,
		waiting, rec.MaxAttempts), retrying)

	require.Regexp(t, `id="slow-baseline">A completed job is slow when it took 1.5× its kind's median or longer, the median of its kind's last 20 completed jobs before this run: <span data-kind="report">report (no earlier job|[0-9.]+(ms|µs|s), p95 [0-9.]+(ms|µs|s), over \d+ jobs?)</span>\.`, page)
	require.Contains(t, page, "No job was slow.")
	require.Contains(t, e.page(t, "/runs/"+run+"?slow_factor=3&history=5", http.StatusOK), "took 3× its kind's median or longer, the median of its kind's last 5 completed")
	require.Contains(t, e.page(t, "/runs/"+run+"?slow_factor=0.5", http.StatusBadRequest), "slow_factor")

	require.Contains(t, e.page(t, "/runs/nope", http.StatusNotFound), "no run nope")
	reader := &env{db: e.db, reg: e.reg, client: e.client}
	h, err := console.New(e.client, console.WithLogger(quiet()))
	require.NoError(t, err)
	reader.srv = httptest.NewServer(h)
	t.Cleanup(reader.srv.Close)
	require.NotContains(t, reader.page(t, "/runs/"+run, http.StatusOK), "Retry these", "a reader may not retry")
}

// A schedule whose ticks no runner recorded, but whose run has jobs,
// links to that run rather than saying it never ran.
func TestSchedulesLinkTheirLatestRun(t *testing.T) {
	t.Parallel()
	db, reg, _ := newClient(t)
	require.NoError(t, reg.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0),
		Jobs: func(queue.Tick) []queue.Params { return nil }}))
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()))
	require.NoError(t, err)
	h, err := console.New(c, console.WithLogger(quiet()), console.WithCountsCache(0))
	require.NoError(t, err)
	e := &env{db: db, reg: reg, client: c, srv: httptest.NewServer(h), h: h}
	t.Cleanup(e.srv.Close)
	require.Contains(t, e.page(t, "/schedules", http.StatusOK), "none yet")
	for _, run := range []string{"nightly@2025-12-07T23:00:00Z", "nightly@2025-12-08T23:00:00Z"} {
		e.enqueue(t, report{County: "Travis"}, queue.InRun(run))
	}
	page := e.page(t, "/schedules", http.StatusOK)
	require.Contains(t, page, `no tick recorded; latest run <a href="runs/nightly@2025-12-08T23:00:00Z" data-latest-run>nightly@2025-12-08T23:00:00Z</a>`)
}

// The audit log says in words what each change acted on, linking the
// jobs; the jobs page's bulk retry says what it touches when no filter
// is set.
func TestAuditReadsInWords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	bad := e.enqueue(t, report{County: "El Paso", Fail: true})
	e.work(t, bad)
	later := queue.RunAt(time.Now().Add(time.Hour))
	q1 := e.enqueue(t, report{County: "a"}, queue.OnQueue("q1"), later)
	require.Equal(t, http.StatusOK, e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/retry", bad), "").status)
	require.Equal(t, http.StatusOK, e.do(t, "POST", "/api/jobs/retry", fmt.Sprintf(`{"ids":[%d,%d]}`, bad, q1)).status)
	require.Equal(t, http.StatusOK, e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"queue":"q1","statuses":["QUEUED"],"q":"a"}}`).status)
	require.Equal(t, http.StatusOK, e.do(t, "POST", "/api/queues/q1/pause", "").status)

	page := e.page(t, "/audit", http.StatusOK)
	cells := regexp.MustCompile(`<td data-col="target" data-label="To">(.*?)</td>`).FindAllStringSubmatch(page, -1)
	require.Len(t, cells, 4)
	require.Equal(t, `queue <a href="jobs?queue=q1">q1</a>`, cells[0][1])
	require.Equal(t, `<a href="jobs?q=a&amp;queue=q1&amp;status=QUEUED">queued jobs on queue q1, &#34;a&#34; in their error or arguments</a>`, cells[1][1])
	require.Equal(t, fmt.Sprintf(`jobs <a href="jobs/%d">#%d</a>, <a href="jobs/%d">#%d</a>`, bad, bad, q1, q1), cells[2][1])
	require.Equal(t, fmt.Sprintf(`job <a href="jobs/%d">#%d</a>`, bad, bad), cells[3][1])

	jobs := e.page(t, "/jobs", http.StatusOK)
	require.Contains(t, jobs, `data-words="every one of the failed jobs: no filter is set">Retry every failed job…</button>`)
	filtered := e.page(t, "/jobs?queue=q1&kind=report", http.StatusOK)
	require.Contains(t, filtered, `data-words="failed jobs of kind report, on queue q1">Retry all matching…</button>`)
	require.Contains(t, filtered, `data-words="queued or running jobs of kind report, on queue q1">Cancel all matching…</button>`)
}

// A job's page says what it holds up, and who cancelled it: through the
// console (from the audit log) or not.
func TestJobTellsItsStory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[countyRollup](func(context.Context, *queue.Job[countyRollup]) error { return nil })))
	require.NoError(t, queue.Depend(e.reg, queue.Rule{Name: "rollup", Parents: []string{report{}.Kind()}, Each: true},
		func([]queue.JobRecord) (countyRollup, []queue.EnqueueOption) { return countyRollup{}, nil }))
	bad := e.enqueue(t, report{County: "El Paso", Fail: true})
	e.work(t, bad)
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", bad), http.StatusOK),
		`id="children">none yet: rule <strong>rollup</strong> creates its job once this one completes, which it will not unless it is retried</dd>`)

	later := queue.RunAt(time.Now().Add(time.Hour))
	byConsole := e.enqueue(t, report{County: "a"}, later)
	byProgram := e.enqueue(t, report{County: "b"}, later)
	require.Equal(t, http.StatusOK, e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", byConsole), "").status)
	_, err := e.client.Cancel(context.Background(), byProgram)
	require.NoError(t, err)
	entries, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)

	page := e.page(t, fmt.Sprintf("/jobs/%d", byConsole), http.StatusOK)
	require.Regexp(t, fmt.Sprintf(`id="cancelled-by">Cancelled through the console by <strong>tester</strong> <time [^>]+>just now</time> \(<a href="audit">audit entry #%d</a>\)\.`, entries[0].ID), page)
	require.Regexp(t, `id="attempt-line">cancelled <time [^>]+>just now</time> after 0 attempts`, page)
	require.Contains(t, page, `id="children">none yet: rule <strong>rollup</strong> creates its job once this one completes, which it will not`)
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", byProgram), http.StatusOK), `id="cancelled-by">Cancelled outside this console`)
}

// A run says when it finished and how long it took, beside the run before
// it and the usual wall time of its schedule's earlier runs, on the
// overview and on its page; one still going says it has not finished.
func TestRunsSayHowLongTheyTook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	night := func(day int) time.Time { return time.Date(2025, 12, day, 23, 0, 0, 0, time.UTC) }
	// The nights of the 5th to the 8th took 1 h 50, 2 h, 2 h 5 and 2 h 10.
	tooks := map[int]time.Duration{5: 110 * time.Minute, 6: 2 * time.Hour, 7: 125 * time.Minute, 8: 130 * time.Minute}
	jobs := map[int][2]int64{}
	for day := 5; day <= 8; day++ {
		run := "nightly@" + night(day).Format(time.RFC3339)
		ids := [2]int64{e.enqueue(t, report{County: fmt.Sprint("a", day)}, queue.InRun(run)),
			e.enqueue(t, report{County: fmt.Sprint("b", day), Fail: day == 8}, queue.InRun(run))}
		e.work(t, ids[:]...)
		jobs[day] = ids
	}
	// Their times are set once no runner is left to prune jobs that
	// finished that long ago.
	for day, ids := range jobs {
		e.setTime(t, ids[0], "completed_at", night(day).Add(tooks[day]))
		e.setTime(t, ids[1], "completed_at", night(day).Add(tooks[day]-time.Minute))
		e.setRunStart(t, "nightly@"+night(day).Format(time.RFC3339), night(day))
	}
	const last = "nightly@2025-12-08T23:00:00Z"
	want := `<p class="wall" data-wall>Finished <time datetime="2025-12-09T01:10:00Z" data-local="hm">01:10 UTC</time>, ` +
		`took <strong data-took>2 h 10 min</strong>; the run before took <span data-took-previous>2 h 5 min</span>; ` +
		`usually <span data-took-usual>2 h</span>, the median of 3 earlier runs.</p>`
	require.Contains(t, e.page(t, "/", http.StatusOK), want)
	require.Contains(t, e.page(t, "/runs/"+last, http.StatusOK), want)
	require.Contains(t, e.page(t, "/runs/nightly@2025-12-05T23:00:00Z", http.StatusOK),
		`<p class="wall" data-wall>Finished <time datetime="2025-12-06T00:50:00Z" data-local="hm">00:50 UTC</time>, took <strong data-took>1 h 50 min</strong>.</p>`,
		"the first run has nothing to compare with")
	var runs struct {
		Runs []struct {
			RunID          string     `json:"run_id"`
			LastFinishedAt *time.Time `json:"last_finished_at"`
		}
	}
	e.do(t, "GET", "/api/runs", "").decode(t, &runs)
	require.Equal(t, last, runs.Runs[0].RunID)
	require.NotNil(t, runs.Runs[0].LastFinishedAt)
	require.True(t, runs.Runs[0].LastFinishedAt.Equal(night(8).Add(130*time.Minute)))

	// Tonight's run has a job still to run.
	const tonight = "nightly@2025-12-09T23:00:00Z"
	done := e.enqueue(t, report{County: "done"}, queue.InRun(tonight))
	e.work(t, done)
	e.enqueue(t, report{County: "later"}, queue.InRun(tonight), queue.RunAt(time.Now().Add(time.Hour)))
	e.setTime(t, done, "completed_at", night(9).Add(30*time.Minute))
	e.setRunStart(t, tonight, night(9))
	require.Contains(t, e.page(t, "/", http.StatusOK),
		`<p class="wall" data-wall>Not finished yet: its latest job to finish did at <time datetime="2025-12-09T23:30:00Z" data-local="hm">23:30 UTC</time>, 30 min after the run started; the run before took <span data-took-previous>2 h 10 min</span>; `+
			`usually <span data-took-usual>2 h</span>, the median of 4 earlier runs.</p>`)
}

// setRunStart sets when run's first job was created, as the runs list
// orders runs by it, and drops the counts a runner's roll-up kept of it,
// so that they are read again from its jobs, as changed.
func (e *env) setRunStart(t *testing.T, run string, at time.Time) {
	t.Helper()
	var v any = at
	if pgtest.Store() == "sqlite" {
		v = at.UTC().Format(sqlitedb.TimeLayout)
	}
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_runs SET first_created = ?, counts = NULL WHERE run_id = ?", v, run).Error)
}

// A slow job stands beside its kind's median and 95th percentile over
// the earlier jobs, whose number the page states; the factor and the
// number of jobs are the page's to change.
func TestSlowJobsAgainstTheirBaseline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const run = "nightly@2025-12-08T23:00:00Z"
	var earlier []int64
	for i := range 10 {
		earlier = append(earlier, e.enqueue(t, report{County: fmt.Sprint("county", i)}))
	}
	slow := e.enqueue(t, report{County: "Harris"}, queue.InRun(run))
	usual := e.enqueue(t, report{County: "Travis"}, queue.InRun(run))
	e.work(t, append(earlier, slow, usual)...)
	// Earlier: 1 to 10 minutes, on the 1st; the run's, on the 8th: 20
	// minutes and 2.
	ran := func(id int64, start time.Time, took time.Duration) {
		e.setTime(t, id, "created_at", start)
		e.setTime(t, id, "started_at", start)
		e.setTime(t, id, "completed_at", start.Add(took))
	}
	for i, id := range earlier {
		ran(id, time.Date(2025, 12, 1, 23, i, 0, 0, time.UTC), time.Duration(i+1)*time.Minute)
	}
	ran(slow, time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC), 20*time.Minute)
	ran(usual, time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC), 2*time.Minute)

	page := e.page(t, "/runs/"+run, http.StatusOK)
	require.Contains(t, page, `<span data-kind="report">report 5m30s, p95 9m33s, over 10 jobs</span>.`)
	row := regexp.MustCompile(`(?s)<section aria-labelledby="slow-h".*?</section>`).FindString(page)
	require.Contains(t, row, fmt.Sprintf(`<a href="jobs/%d">#%d report</a></th><td class="num" data-label="Took">20m00s</td><td class="num" data-label="Median">5m30s</td><td class="num" data-label="p95">9m33s</td><td class="num" data-label="Times the median">3.6×</td>`, slow, slow))
	require.NotContains(t, row, fmt.Sprintf(`#%d report`, usual))

	// Against the latest four, 7 to 10 minutes; at 4× the median, 20
	// minutes is not slow.
	page = e.page(t, "/runs/"+run+"?history=4", http.StatusOK)
	require.Contains(t, page, `report 8m30s, p95 9m51s, over 4 jobs</span>.`)
	require.Contains(t, e.page(t, "/runs/"+run+"?slow_factor=4", http.StatusOK), "No job was slow.")

	var rv struct {
		Review struct {
			Typical []map[string]any `json:"typical"`
			Slow    []struct {
				TypicalSeconds float64 `json:"typical_seconds"`
				P95Seconds     float64 `json:"p95_seconds"`
			} `json:"slow"`
		} `json:"review"`
	}
	e.do(t, "GET", "/api/runs/"+url.PathEscape(run)+"/review", "").decode(t, &rv)
	require.Equal(t, []map[string]any{{"kind": "report", "seconds": 330.0, "p95_seconds": 573.0, "jobs": 10.0, "days": 0.0}}, rv.Review.Typical)
	require.Len(t, rv.Review.Slow, 1)
	require.Equal(t, 330.0, rv.Review.Slow[0].TypicalSeconds)
	require.Equal(t, 573.0, rv.Review.Slow[0].P95Seconds)
}

// The jobs of a run that were cancelled before they started are among
// those that never ran, with who cancelled each: through the console (its
// audit entry linked) or not.
func TestReviewSaysWhoCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run = "nightly@2025-12-08T23:00:00Z"
	later := queue.RunAt(time.Now().Add(time.Hour))
	byConsole := e.enqueue(t, report{County: "Travis"}, queue.InRun(run), later)
	byProgram := e.enqueue(t, report{County: "Harris"}, queue.InRun(run), later)
	started := e.enqueue(t, report{County: "Bexar"}, queue.InRun(run), later)
	require.Equal(t, http.StatusOK, e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", byConsole), "").status)
	_, err := e.client.Cancel(context.Background(), byProgram)
	require.NoError(t, err)
	_, err = e.client.Cancel(context.Background(), started)
	require.NoError(t, err)
	e.setTime(t, started, "started_at", time.Now().Add(-time.Minute)) // cancelled as it ran
	entries, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)

	page := e.page(t, "/runs/"+run, http.StatusOK)
	never := regexp.MustCompile(`(?s)<section aria-labelledby="never-h".*?</section>`).FindString(page)
	require.Regexp(t, fmt.Sprintf(`<li data-cancelled="%d"><a href="jobs/%d">#%d report</a> \(CANCELLED\): <span data-reason="cancelled">cancelled before it started, through the console by <strong>tester</strong> <time [^>]+>just now</time> \(<a href="audit#audit-%d">audit entry #%d</a>\)</span></li>`,
		byConsole, byConsole, byConsole, entries[0].ID, entries[0].ID), never)
	require.Contains(t, never, fmt.Sprintf(`<li data-cancelled="%d"><a href="jobs/%d">#%d report</a> (CANCELLED): <span data-reason="cancelled">cancelled before it started, outside this console`, byProgram, byProgram, byProgram))
	require.NotContains(t, never, fmt.Sprintf(`data-cancelled="%d"`, started), "it started")
	require.NotContains(t, never, "Every job of this run")

	var rv struct {
		Review struct {
			Cancelled []struct {
				Job     map[string]any `json:"job"`
				By      string         `json:"by"`
				AuditID int64          `json:"audit_id"`
			} `json:"cancelled"`
		} `json:"review"`
	}
	e.do(t, "GET", "/api/runs/"+url.PathEscape(run)+"/review", "").decode(t, &rv)
	require.Len(t, rv.Review.Cancelled, 2)
	byID := map[int64]string{}
	for _, c := range rv.Review.Cancelled {
		byID[idOf(c.Job)] = c.By
		if c.By != "" {
			require.Equal(t, entries[0].ID, c.AuditID)
		}
	}
	require.Equal(t, map[int64]string{byConsole: "tester", byProgram: ""}, byID)
}

// A job whose batch window is closed says so, and when it opens; the
// run's review gives the same reason.
func TestWaitingForItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now().UTC()
	w, err := queue.DailyWindow(now.Add(2*time.Hour).Format("15:04"), now.Add(3*time.Hour).Format("15:04"), nil)
	require.NoError(t, err)
	e.reg.QueueWindow("night", w)
	id := e.enqueue(t, report{County: "Travis"}, queue.OnQueue("night"), queue.InRun("nightly@1"))

	page := e.page(t, fmt.Sprintf("/jobs/%d", id), http.StatusOK)
	require.Regexp(t, `id="wait">Due since <time [^>]+>(just now|in a moment)</time>\. Its batch window `+regexp.QuoteMeta(w.String())+
		` is closed; it opens <time [^>]+>in (1|2) h</time>\.</p>`, page)
	review := e.page(t, "/runs/nightly@1", http.StatusOK)
	require.Contains(t, review, `<span data-reason="window_closed">its window `+w.String()+` is closed</span>`)
}
