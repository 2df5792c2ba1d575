package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/browsertest"
)

// wallSays is how last night's wall time reads on the overview. Its
// durations are the demo's clock's, which may make one whole hours, read
// without minutes ("1 h").
var wallSays = regexp.MustCompile(`^Not finished yet: its latest job to finish did at \d\d:\d\d, ` + took +
	` after the run started; the run before took ` + took + `\.$`)

// took is how the overview writes a duration: "45 s", "12 min", "2 h",
// "2 h 10 min", "1 day 3 h".
const took = `(\d+ s|\d+ min|\d+ h( \d+ min)?|\d+ days?( \d+ h)?)`

// TestBrowserDemo starts the demo on its default database, a new SQLite
// file in a temporary folder, and reads a few things over HTTP; then it
// opens every page of the dashboard in Chromium, once the demo's night has
// run, and saves a screenshot of each (with SHEAF_SCREENSHOTS=. the
// README's pictures are made afresh); it stops the demo and finds the
// folder clean.
func TestBrowserDemo(t *testing.T) {
	exampledb.NoLeftovers(t)
	base, stop := start(t, options{demo: true})
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	status, health := call(t, "GET", base+"/api/health", "")
	if status != http.StatusOK || health["status"] != "ok" {
		t.Fatalf("health: %d %v", status, health)
	}
	status, jobs := call(t, "GET", base+"/api/jobs?kind=county_report&limit=100", "")
	if status != http.StatusOK || len(jobs["jobs"].([]any)) != 2*len(counties) { // two nights
		t.Fatalf("jobs: %d %v", status, jobs)
	}
	status, sched := call(t, "GET", base+"/api/schedules", "")
	if status != http.StatusOK || len(sched["schedules"].([]any)) != 1 {
		t.Fatalf("schedules: %d %v", status, sched)
	}

	b := browsertest.New(t, 1280, 900)
	b.Run(t, chromedp.Navigate(base+"/"), chromedp.WaitReady("#totals"))
	// The night before's county reports and their summaries, last
	// night's, and the day's three exports: the page refreshes itself
	// until they are done.
	const completed = 8 + 8 + 6 + 6 + 3
	b.Wait(t, `document.querySelector('#totals td[data-status="COMPLETED"]').textContent.trim() === "`+
		strconv.Itoa(completed)+`" && document.querySelector('#totals td[data-status="PROCESSING"]').textContent.trim() === "0"`)
	b.Screenshot(t, "overview")
	var verdict, wall, when string
	b.Run(t, chromedp.Text(`#night [data-schedule="nightly"] [data-verdict]`, &verdict),
		chromedp.Text(`#night [data-schedule="nightly"] [data-wall]`, &wall),
		chromedp.Text(`#night [data-schedule="nightly"] .night-when time`, &when))
	if verdict != "needs a look" {
		t.Errorf("last night's verdict: %q", verdict)
	}
	// Last night ran from 23:00 UTC, and is not finished: a report waits
	// for its retry.
	if !wallSays.MatchString(wall) {
		t.Errorf("last night's wall time: %q", wall)
	}
	if when == "just now" || when == "in a moment" {
		t.Errorf("last night started %q", when)
	}

	retryReadsAsNow(t, b, base)

	var failed int
	b.Run(t, chromedp.Navigate(base+"/jobs?status=FAILED"), chromedp.WaitReady("#jobs-region"),
		chromedp.Evaluate(`Number(document.querySelector("tr[data-job]").dataset.job)`, &failed))
	b.Run(t, chromedp.Navigate(base+"/jobs"), chromedp.WaitReady("#jobs-region"))
	// The list fits the window: no column, the errors' least of all, runs
	// past its edge.
	var fits bool
	b.Run(t, chromedp.Evaluate(`(s => s.scrollWidth <= s.clientWidth)(document.querySelector("#jobs-region .scroll"))`, &fits))
	if !fits {
		t.Error("the jobs list is wider than a 1280 px window")
	}
	b.Screenshot(t, "jobs")
	b.Run(t, chromedp.Navigate(base+fmt.Sprintf("/jobs/%d", failed)), chromedp.WaitReady("#attempts"))
	b.Screenshot(t, "job")
	b.Run(t, chromedp.Navigate(base+"/runs"), chromedp.WaitReady("#runs-region"),
		chromedp.Click(`tr[data-run] a`), chromedp.WaitVisible(`#stopped svg.chain`))
	b.Screenshot(t, "review")
	// Harris County's report of last night (the later of its two) is
	// slow; a busy machine may slow others down too.
	status, found := call(t, "GET", base+"/api/jobs?kind=county_report&q=Harris", "")
	if status != http.StatusOK {
		t.Fatalf("Harris County's reports: %d %v", status, found)
	}
	var harris int64
	for _, j := range found["jobs"].([]any) {
		harris = max(harris, int64(j.(map[string]any)["id"].(float64)))
	}
	var slow []string
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll("#slow tbody tr th")].map(e => e.textContent)`, &slow))
	if !slices.Contains(slow, fmt.Sprintf("#%d county_report", harris)) {
		t.Errorf("slow jobs %v, want Harris County's report, #%d", slow, harris)
	}
	b.Run(t, chromedp.Navigate(base+"/schedules"), chromedp.WaitReady("#schedules-region"))
	b.Screenshot(t, "schedules")
	b.Run(t, chromedp.Navigate(base+"/"), chromedp.WaitReady(`button[data-post="api/queues/exports/pause"]`),
		chromedp.Click(`button[data-post="api/queues/exports/pause"]`),
		chromedp.WaitVisible(`#confirm-ok`), chromedp.Click(`#confirm-ok`),
		chromedp.WaitReady(`button[data-post="api/queues/exports/resume"]`),
		chromedp.Navigate(base+"/audit"), chromedp.WaitReady(`tr[data-audit]`))
	b.Screenshot(t, "audit")
	// The page's pause came from loopback, which the demo lets change things.
	status, audit := call(t, "GET", base+"/api/audit", "")
	entries, _ := audit["entries"].([]any)
	if status != http.StatusOK || len(entries) != 1 || entries[0].(map[string]any)["action"] != "pause" {
		t.Fatalf("audit: %d %v", status, audit)
	}

	b.Run(t, chromedp.Navigate(base+"/limits"), chromedp.WaitReady(`tr[data-limit="kind export"]`))
	b.Screenshot(t, "limits")

	phone := browsertest.New(t, 390, 844)
	phone.Run(t, chromedp.Navigate(base+"/"), chromedp.WaitReady("#night"))
	phone.ScreenshotWindow(t, "phone-overview")
	phone.Run(t, chromedp.Navigate(base+"/jobs"), chromedp.WaitReady("#jobs-region"))
	phone.ScreenshotWindow(t, "phone-jobs")
}

// retryReadsAsNow checks the report waiting for its retry: its attempts
// since last night, each as long after the one before as the backoff
// says, the latest one past and the next one ahead, and its page says
// which attempt comes next.
func retryReadsAsNow(t *testing.T, b *browsertest.Browser, base string) {
	t.Helper()
	status, found := call(t, "GET", base+"/api/jobs?kind=county_report&status=QUEUED", "")
	jobs, _ := found["jobs"].([]any)
	if status != http.StatusOK || len(jobs) != 1 {
		t.Fatalf("the report waiting for its retry: %d %v", status, found)
	}
	id := int64(jobs[0].(map[string]any)["id"].(float64))
	var detail struct {
		Job struct {
			RunAt       time.Time `json:"run_at"`
			Attempts    int       `json:"attempts"`
			MaxAttempts int       `json:"max_attempts"`
		} `json:"job"`
		Attempts []struct {
			StartedAt  time.Time `json:"started_at"`
			FinishedAt time.Time `json:"finished_at"`
		} `json:"attempts"`
	}
	get(t, base+fmt.Sprintf("/api/jobs/%d", id), &detail)
	n := len(detail.Attempts)
	if n == 0 || n != detail.Job.Attempts || n >= detail.Job.MaxAttempts {
		t.Fatalf("job %d: %d attempts listed, %d of %d used", id, n, detail.Job.Attempts, detail.Job.MaxAttempts)
	}
	now := time.Now()
	if first := detail.Attempts[0].StartedAt; first.Before(lastNight()) || first.After(lastNight().Add(3*time.Hour)) {
		t.Errorf("job %d: first attempt at %s, not in last night's run", id, first)
	}
	for i := 1; i < n; i++ {
		if want := detail.Attempts[i-1].FinishedAt.Add(reportRetries.Delay(i)); !detail.Attempts[i].StartedAt.Equal(want) {
			t.Errorf("job %d: attempt %d started at %s, want %s", id, i+1, detail.Attempts[i].StartedAt, want)
		}
	}
	last := detail.Attempts[n-1].FinishedAt
	if want := last.Add(reportRetries.Delay(n)); !detail.Job.RunAt.Equal(want) || !last.Before(now) || !detail.Job.RunAt.After(now) {
		t.Errorf("job %d: last attempt ended %s, due %s (want %s, after now, %s)", id, last, detail.Job.RunAt, want, now)
	}
	var wait string
	b.Run(t, chromedp.Navigate(base+fmt.Sprintf("/jobs/%d", id)), chromedp.Text("#wait", &wait))
	if !regexp.MustCompile(fmt.Sprintf(`^Retry in \d+ (min|h) \(attempt %d of %d\), after %d failed attempts?\.$`, n+1, reportAttempts, n)).MatchString(wait) {
		t.Errorf("job %d says %q", id, wait)
	}
}

// get decodes the JSON that a GET of url answers into v.
func get(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
