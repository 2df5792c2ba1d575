package main

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/browsertest"
)

// wallSays is how last night's wall time reads on the overview.
var wallSays = regexp.MustCompile(`^Not finished yet: its latest job to finish did at \d\d:\d\d, (\d+ h )?\d+ min after the run started; ` +
	`the run before took (\d+ h )?\d+ min\.$`)

// TestBrowserDemo opens every page of the demo's dashboard in Chromium,
// once its night has run, and saves a screenshot of each: with
// SHEAF_SCREENSHOTS=. the README's pictures are made afresh.
func TestBrowserDemo(t *testing.T) {
	exampledb.NoLeftovers(t)
	base, stop := start(t, options{demo: true})
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
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
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll("#slow tbody tr td:first-child")].map(e => e.textContent)`, &slow))
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

	b.Run(t, chromedp.Navigate(base+"/limits"), chromedp.WaitReady(`tr[data-limit="kind export"]`))
	b.Screenshot(t, "limits")

	phone := browsertest.New(t, 390, 844)
	phone.Run(t, chromedp.Navigate(base+"/"), chromedp.WaitReady("#night"))
	phone.ScreenshotWindow(t, "phone-overview")
	phone.Run(t, chromedp.Navigate(base+"/jobs"), chromedp.WaitReady("#jobs-region"))
	phone.ScreenshotWindow(t, "phone-jobs")
}
