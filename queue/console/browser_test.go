package console_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// The browser tests drive the dashboard in a headless Chromium
// (internal/browsertest), at 1280 pixels wide unless they say otherwise.

const desktopW, desktopH = 1280, 900

// open loads a page of the console and waits for its script to have run
// (the zone line names the browser's zone).
func open(t *testing.T, b *browsertest.Browser, e *env, path string) {
	t.Helper()
	b.Run(t, chromedp.Navigate(e.srv.URL+path),
		chromedp.WaitReady("#main"),
		chromedp.Poll(`document.getElementById("zone").textContent.includes("`+browsertest.Zone+`")`, nil))
}

// texts returns the text of every element sel matches.
func texts(t *testing.T, b *browsertest.Browser, sel string) []string {
	t.Helper()
	var out []string
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll(`+strconv.Quote(sel)+`)].map(e => e.textContent.trim())`, &out))
	return out
}

// jobIDs returns the IDs of the jobs listed on the page.
func jobIDs(t *testing.T, b *browsertest.Browser) []int64 {
	t.Helper()
	var out []int64
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll("tr[data-job]")].map(e => Number(e.dataset.job))`, &out))
	return out
}

func TestBrowserOverviewShowsTheCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("ok", i)}))
	}
	ids = append(ids, e.enqueue(t, report{County: "bad", Fail: true}), e.enqueue(t, report{County: "bad2", Fail: true}))
	e.work(t, ids...)
	for i := range 3 {
		e.enqueue(t, report{County: fmt.Sprint("later", i)}, queue.OnQueue("exports"))
	}
	_, err := e.client.Cancel(context.Background(), e.enqueue(t, report{County: "mistake"}, queue.OnQueue("exports")))
	require.NoError(t, err)

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/")
	qs, err := e.client.Queues(context.Background())
	require.NoError(t, err)
	require.Len(t, qs, 2)
	total := map[queue.Status]int64{}
	for _, q := range qs {
		for _, s := range queue.Statuses() {
			got := texts(t, b, fmt.Sprintf(`tr[data-queue=%q] td[data-status=%q]`, q.Name, s))
			require.Equal(t, []string{strconv.FormatInt(q.Counts[s], 10)}, got, "queue %s, %s", q.Name, s)
			total[s] += q.Counts[s]
		}
	}
	for _, s := range queue.Statuses() {
		require.Equal(t, []string{strconv.FormatInt(total[s], 10)}, texts(t, b, fmt.Sprintf(`#totals td[data-status=%q]`, s)), "all, %s", s)
	}
	require.EqualValues(t, 2, total[queue.StatusFailed])
	// Times are in the viewer's zone, named.
	seen := texts(t, b, "#runners time")
	require.Empty(t, seen, "no runner runs now")
	stamp := texts(t, b, "#counts .note time")
	require.Len(t, stamp, 1)
	require.Regexp(t, `E[SD]T`, stamp[0])
	b.Screenshot(t, "overview")
}

func TestBrowserSearchFindsTheError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []int64
	for i := range 12 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprintf("county-%02d", i), Fail: i%3 == 0}))
	}
	e.work(t, ids...)
	want, err := e.client.List(context.Background(), queue.Filter{Search: "upstream returned 503", Newest: true})
	require.NoError(t, err)
	require.Len(t, want, 4)

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/jobs")
	b.Run(t, browsertest.Type(`input[name="q"]`, "upstream returned 503"),
		browsertest.Click(`#filters button[type="submit"]`),
		chromedp.WaitReady(`#jobs-region`))
	b.Wait(t, `location.search.includes("q=upstream")`)
	got := jobIDs(t, b)
	var wantIDs []int64
	for _, j := range want {
		wantIDs = append(wantIDs, j.ID)
	}
	require.Equal(t, wantIDs, got)
	var search string
	b.Run(t, chromedp.Evaluate(`location.search`, &search))
	require.NotContains(t, search, "kind=", "empty fields are not sent")
	b.Screenshot(t, "search")
}

// flaky is a kind whose first attempt fails for good; a retry succeeds.
type flaky struct{}

func (flaky) Kind() string { return "flaky" }

// flaky registers the kind flaky and submits a job of it.
func (e *env) flaky(t *testing.T) int64 {
	t.Helper()
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[flaky](func(_ context.Context, j *queue.Job[flaky]) error {
		if j.Attempt == 1 {
			return queue.Permanent(errors.New("the ledger was locked"))
		}
		return nil
	})))
	res, err := e.client.Enqueue(context.Background(), flaky{})
	require.NoError(t, err)
	return res.Job.ID
}

func TestBrowserRetryFromTheJobPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.flaky(t)
	e.work(t, id)
	queuetest.StartRunner(t, e.client, queue.WithPollInterval(20*time.Millisecond))

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, fmt.Sprintf("/jobs/%d", id))
	require.Equal(t, []string{"FAILED"}, texts(t, b, "#status"))
	b.Run(t, browsertest.Click("#retry"))
	b.Wait(t, `document.getElementById("status").textContent === "COMPLETED"`)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, rec.Status)
	require.Len(t, texts(t, b, "#attempts li"), 2, "the failed attempt and the one that completed")
	require.Contains(t, texts(t, b, "#flash")[0], "queued again")
	b.Screenshot(t, "job-retried")
}

// A job's Cancel button sends the reason typed beside it, which the job's
// page then shows.
func TestBrowserCancelWithAReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "Travis"}, queue.RunAt(time.Now().Add(time.Hour)))

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, fmt.Sprintf("/jobs/%d", id))
	b.Run(t, browsertest.Type("#cancel-reason", "  the county withdrew it "), browsertest.Click("#cancel"))
	b.Wait(t, `document.getElementById("confirm").open`)
	b.Run(t, browsertest.Click("#confirm-ok"))
	b.Wait(t, `document.getElementById("cancel-reason-given") !== null`)
	require.Equal(t, []string{"Reason: “the county withdrew it”."}, texts(t, b, "#cancel-reason-given"))
	audit, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"job":%d,"reason":"the county withdrew it"}`, id), string(audit[0].Target))
}

// What an operator types on a page that refreshes itself stays as the
// page refreshes: the reason to cancel, and the focus in its field.
func TestBrowserRefreshKeepsWhatIsTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "Travis"}, queue.RunAt(time.Now().Add(time.Hour)))

	b := browsertest.New(t, desktopW, desktopH)
	b.SpeedUpTimers(t, 10) // the page refreshes ten times as often
	open(t, b, e, fmt.Sprintf("/jobs/%d", id))
	b.Run(t, browsertest.Type("#cancel-reason", "the county withdrew"))
	// Marked, then replaced by a fresh copy: a refresh happened.
	b.Run(t, chromedp.Evaluate(`document.getElementById("job").dataset.old = "1"`, nil))
	b.Wait(t, `document.getElementById("job").dataset.old === undefined`)
	// Read in one evaluation: the page may refresh again between two.
	const field = `[document.getElementById("cancel-reason").value, document.activeElement.id]`
	var got []string
	b.Run(t, chromedp.Evaluate(field, &got))
	require.Equal(t, []string{"the county withdrew", "cancel-reason"}, got, "the reason, and the focus in its field")
	b.Run(t, chromedp.KeyEvent(" it"), chromedp.Evaluate(field, &got))
	require.Equal(t, []string{"the county withdrew it", "cancel-reason"}, got, "the caret stayed at the end")
}

func TestBrowserBulkCancelByFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	later := queue.RunAt(time.Now().Add(time.Hour))
	var inA, inB []int64
	for i := range 5 {
		inA = append(inA, e.enqueue(t, report{County: fmt.Sprint("a", i)}, queue.OnQueue("exports"), later))
		inB = append(inB, e.enqueue(t, report{County: fmt.Sprint("b", i)}, later))
	}

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/jobs?queue=exports")
	b.Run(t, browsertest.Type("#cancel-reason", "exports wait for the new bucket"), browsertest.Click("#cancel-matching"))
	// The page's own dialog, not the browser's: it says what the filter
	// selects, and shows the first jobs.
	b.Wait(t, `document.getElementById("confirm").open`)
	require.Equal(t, []string{"Cancel 5 queued or running jobs?"}, texts(t, b, "#confirm-q"))
	require.Equal(t, []string{"It touches queued or running jobs on queue exports."}, texts(t, b, "#confirm-detail"))
	preview := texts(t, b, "#confirm-preview li")
	require.Len(t, preview, 5)
	require.Equal(t, fmt.Sprintf("#%d report on exports", inA[4]), preview[0])
	b.Screenshot(t, "bulk-dialog")
	b.Run(t, browsertest.Click("#confirm-ok"))
	b.Wait(t, `document.getElementById("flash").textContent.includes("changed")`)
	require.Equal(t, []string{"Cancel: 5 jobs changed, of the 5 that matched. The audit log has it."}, texts(t, b, "#flash"))
	require.Empty(t, b.Dialogs(), "no browser dialog")
	for _, id := range inA {
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, queue.StatusCancelled, rec.Status, "job %d of the filter", id)
	}
	for _, id := range inB {
		rec, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, rec.Status, "job %d outside the filter", id)
	}
	b.Wait(t, `[...document.querySelectorAll("tr[data-job] .badge")].every(e => e.textContent === "CANCELLED")`)
	audit, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)
	require.Equal(t, "cancel", audit[0].Action)
	require.EqualValues(t, 5, audit[0].Changed)
	require.JSONEq(t, `{"filter":{"queue":"exports","statuses":["QUEUED","PROCESSING"]},"reason":"exports wait for the new bucket"}`, string(audit[0].Target))
	b.Screenshot(t, "bulk-cancelled")
	// The result links to its audit entry: the audit page that starts at
	// it.
	b.Run(t, browsertest.Click("#flash-audit"))
	b.Wait(t, `location.pathname.endsWith("/audit") && document.querySelector("tr[data-audit]") !== null`)
	var first int64
	var hash string
	b.Run(t, chromedp.Evaluate(`Number(document.querySelector("tr[data-audit]").dataset.audit)`, &first),
		chromedp.Evaluate(`location.hash`, &hash))
	require.Equal(t, audit[0].ID, first)
	require.Equal(t, fmt.Sprintf("#audit-%d", audit[0].ID), hash)
}

func TestBrowserReadOnlyCallerSeesNoButtons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.enqueue(t, report{County: "bad", Fail: true}, queue.InRun("night"))
	e.work(t, bad)
	b := browsertest.New(t, desktopW, desktopH)
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", bad), "/runs/night"} {
		open(t, b, e, p)
		var n int
		b.Run(t, chromedp.Evaluate(`document.querySelectorAll("button[data-post], button[data-bulk], button[data-match], input[name=id]").length`, &n))
		require.Zero(t, n, "buttons on %s", p)
	}
	// A request forged from the page itself is refused.
	var status int
	b.Run(t, chromedp.Evaluate(fmt.Sprintf(`fetch("api/jobs/%d/retry", {method: "POST"}).then(r => r.status)`, bad), &status,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	require.Equal(t, 403, status)
	rec, err := e.client.Get(context.Background(), bad)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, rec.Status)
	b.Screenshot(t, "read-only")
}

// slowExport is a chunked kind whose chunks each wait for the test's word.
type slowExport struct{ Rows int64 }

func (slowExport) Kind() string { return "slow_export" }

type gatedExport struct{ gate chan struct{} }

func (g gatedExport) Records(_ context.Context, j *queue.Job[slowExport]) (int64, iter.Seq2[int64, error], error) {
	return j.Args.Rows, func(yield func(int64, error) bool) {
		for i := range j.Args.Rows {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}

func (g gatedExport) ProcessChunk(ctx context.Context, _ *queue.Job[slowExport], _ batch.Batch[int64]) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (gatedExport) Cleanup(context.Context, *queue.Job[slowExport]) error { return nil }

func TestBrowserProgressBarMoves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gate := make(chan struct{})
	require.NoError(t, queue.RegisterChunked[slowExport, int64](e.reg, gatedExport{gate: gate}, queue.ChunkSize(1)))
	res, err := e.client.Enqueue(context.Background(), slowExport{Rows: 4})
	require.NoError(t, err)
	id := res.Job.ID
	b := browsertest.New(t, desktopW, desktopH) // first: it skips without Chromium
	r := queuetest.StartRunner(t, e.client, queue.WithPollInterval(20*time.Millisecond))
	// Cleanups run last-in first-out: the gate opens before the runner
	// stops, so a test that fails half-way does not wait out Stop's deadline.
	t.Cleanup(func() { close(gate) })
	gate <- struct{}{}     // the first chunk
	b.SpeedUpTimers(t, 10) // the page refreshes every 100 ms, not every second
	open(t, b, e, fmt.Sprintf("/jobs/%d", id))
	b.Wait(t, `Number(document.getElementById("progress")?.value) === 1`)
	require.Equal(t, []string{"1 of 4 (25%)"}, texts(t, b, "#progress-text"))
	b.Wait(t, `document.getElementById("chunk-times")?.textContent.endsWith("over 1 chunk.")`)
	b.Screenshot(t, "progress")

	// While the tab is hidden the page asks the server nothing, though its
	// timer keeps ticking (each tick reads document.hidden); shown again,
	// it refreshes at once.
	b.Run(t, chromedp.Evaluate(`(() => {
		window.fetches = 0;
		const f = window.fetch;
		window.fetch = (...args) => { window.fetches++; return f(...args); };
		window.hiddenReads = 0;
		Object.defineProperty(document, "hidden", {configurable: true, get: () => { window.hiddenReads++; return true; }});
		document.dispatchEvent(new Event("visibilitychange"));
	})()`, nil))
	gate <- struct{}{} // the second chunk, done while the tab is hidden
	b.Wait(t, `window.hiddenReads >= 4`)
	var fetches int
	b.Run(t, chromedp.Evaluate(`window.fetches`, &fetches))
	require.Zero(t, fetches, "a hidden tab refreshed")
	// (The text may already say 2 of 4: a refresh sent just before the
	// tab was hidden can land after the second chunk. What counts is that
	// nothing was asked while hidden, and that showing the tab asks.)
	b.Run(t, chromedp.Evaluate(`(() => {
		Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
		document.dispatchEvent(new Event("visibilitychange"));
	})()`, nil))
	b.Wait(t, `window.fetches >= 1 && Number(document.getElementById("progress").value) === 2`)

	gate <- struct{}{}
	// The page moves by itself: no reload.
	b.Wait(t, `Number(document.getElementById("progress").value) === 3`)
	require.Equal(t, []string{"3 of 4 (75%)"}, texts(t, b, "#progress-text"))
	gate <- struct{}{}
	b.Wait(t, `document.getElementById("status").textContent === "COMPLETED"`)
	// Each chunk's time: a bar each, newest first in the table, with no
	// accessibility violation once the table is open.
	b.Wait(t, `document.querySelectorAll("#chunk-spark rect").length === 4`)
	require.Regexp(t, `^Latest .+, slowest .+, fastest .+, .+ on average over 4 chunks \(the latest attempt's\)\.$`, texts(t, b, "#chunk-times")[0])
	b.Run(t, chromedp.Evaluate(`document.getElementById("chunk-table").open = true`, nil))
	require.Equal(t, []string{"4", "3", "2", "1"}, texts(t, b, "#chunk-table tbody td:first-child"))
	require.Len(t, texts(t, b, "#chunk-spark rect.slowest"), 1)
	b.Screenshot(t, "chunk-times")
	require.Empty(t, axe(t, b))
	_ = r
}

// countyRollup is released by the rule rollup once every county report
// of a group has completed.
type countyRollup struct{}

func (countyRollup) Kind() string { return "county_rollup" }

func TestBrowserMorningReview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[countyRollup](func(context.Context, *queue.Job[countyRollup]) error { return nil })))
	require.NoError(t, queue.Depend(e.reg, queue.Rule{Name: "rollup", Parents: []string{report{}.Kind()}, Each: true},
		func([]queue.JobRecord) (countyRollup, []queue.EnqueueOption) { return countyRollup{}, nil }))
	run := []queue.EnqueueOption{queue.InRun("nightly@2025-12-08"), queue.InPeriod("2025-12-08")}
	var ids []int64
	for i := range 6 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint("county", i), Fail: i >= 4}, run...))
	}
	e.work(t, ids...)
	rv, err := e.client.Review(context.Background(), queue.ReviewQuery{RunID: "nightly@2025-12-08"})
	require.NoError(t, err)
	require.NotEmpty(t, rv.Stopped)

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/runs?period=2025-12-08")
	b.Run(t, browsertest.Click(`tr[data-run="nightly@2025-12-08"] a`), chromedp.WaitVisible(`#failures`))
	groups := texts(t, b, "#failures summary code")
	require.Equal(t, []string{"permanent county county<n>: upstream returned <n> for request <hex>"}, groups, "the prefix is a tag")
	require.Equal(t, []string{"2"}, texts(t, b, "#failures summary .count"))
	failed := texts(t, b, "#failures .ids a")
	require.Len(t, failed, 2)
	var stoppers int
	b.Run(t, chromedp.Evaluate(`document.querySelectorAll("#stopped svg.chain .stopper").length`, &stoppers))
	require.Equal(t, len(rv.Stopped), stoppers, "each stopped chain marks the parent that stopped it")
	captions := texts(t, b, "#stopped figcaption")
	require.Len(t, captions, len(rv.Stopped))
	require.True(t, slices.ContainsFunc(captions, func(s string) bool { return strings.Contains(s, "county_rollup was not created") }))
	b.Screenshot(t, "review")
}

// wideOnAPhone returns what makes the page b shows wider than its
// window, the page itself or a box that scrolls sideways within it (a
// table too wide for its box): a few of the elements that stick out, and
// the widths.
func wideOnAPhone(t *testing.T, b *browsertest.Browser) []string {
	t.Helper()
	var wide []string
	b.Run(t, chromedp.Evaluate(`(() => {
		const root = document.documentElement;
		const boxes = [root, ...document.querySelectorAll(".scroll")].filter(el => el.scrollWidth > el.clientWidth);
		if (!boxes.length) return [];
		return [...document.querySelectorAll("body *")].filter(el => el.getBoundingClientRect().right > root.clientWidth + 1)
			.map(el => el.tagName + "." + el.className).slice(0, 5)
			.concat(boxes.map(el => (el === root ? "page" : "box") + " scrollWidth " + el.scrollWidth + " > " + el.clientWidth));
	})()`, &wide))
	return wide
}

// At 390 pixels no page scrolls sideways, nor does any table in its box:
// every table is a list of cards.
func TestBrowserPagesFitAPhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run = "nightly@2025-12-08T23:00:00Z"
	bad := e.enqueue(t, report{County: "a county with a rather long name", Fail: true}, queue.InRun(run))
	e.work(t, bad)
	later := e.enqueue(t, report{County: "Travis"}, queue.InRun(run), queue.RunAt(time.Now().Add(time.Hour)))
	require.NoError(t, e.client.SetLimit(context.Background(), queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 5, Rate: 100, Per: time.Minute}))
	e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", later), "")
	runner, err := queue.NewRunner(e.client, queue.WithWorkers(1), queue.WithQueues("nothing"))
	require.NoError(t, err)
	require.NoError(t, runner.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, runner.Stop(context.Background())) })
	b := browsertest.New(t, 390, 844)
	open(t, b, e, "/")
	b.Wait(t, `document.querySelector("#runners tbody th") !== null`)
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", bad), "/runs", "/runs/" + run, "/schedules", "/audit", "/limits", "/nowhere"} {
		open(t, b, e, p)
		require.Empty(t, wideOnAPhone(t, b), "%s scrolls sideways on the phone", p)
		if p == "/limits" {
			b.Screenshot(t, "phone-limits")
		}
	}
	open(t, b, e, "/jobs")
	// The jobs are cards, and the filters start folded.
	var display string
	var folded bool
	b.Run(t, chromedp.Evaluate(`getComputedStyle(document.querySelector("tr[data-job]")).display`, &display),
		chromedp.Evaluate(`!document.getElementById("filter-box").open`, &folded))
	require.Equal(t, "block", display)
	require.True(t, folded)
	b.Screenshot(t, "phone-jobs")
	// Every control is labelled.
	var unlabelled []string
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll("input:not([type=hidden]), select, button")]
		.filter(el => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
		.map(el => el.outerHTML)`, &unlabelled))
	require.Empty(t, unlabelled)
}

// Relative times move on while the page stays open: with the browser's
// clock put three hours ahead, a retry due in 57 minutes reads "2 h ago"
// without the page being loaded again.
func TestBrowserRelativeTimesMoveOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "Collin"}, queue.InRun("nightly@1"))
	e.setWaiting(t, id, 1, 57*time.Minute+30*time.Second)
	b := browsertest.New(t, desktopW, desktopH)
	b.SpeedUpTimers(t, 15)
	b.Run(t, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`(() => {
			const now = Date.now;
			Date.now = () => now() + (window.sheafSkew || 0);
		})()`).Do(ctx)
		return err
	}))
	open(t, b, e, fmt.Sprintf("/jobs/%d", id))
	require.Equal(t, []string{"in 57 min"}, texts(t, b, "#wait time[data-rel]"))
	b.Run(t, chromedp.Evaluate(`window.sheafSkew = 3 * 3600e3`, nil))
	b.Wait(t, `document.querySelector("#wait time[data-rel]").textContent === "2 h ago"`)
}

// After a bulk retry, the result says what the retried jobs did: here one
// completes on its second attempt and one fails again.
func TestBrowserBulkRetrySaysWhatTheJobsDid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	retried := e.flaky(t)
	again := e.enqueue(t, report{County: "El Paso", Fail: true})
	e.work(t, retried, again)
	queuetest.StartRunner(t, e.client, queue.WithPollInterval(20*time.Millisecond))

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/jobs?status=FAILED")
	require.ElementsMatch(t, []int64{retried, again}, jobIDs(t, b))
	b.Run(t, browsertest.Click(`input[name="id"][value="`+strconv.FormatInt(retried, 10)+`"]`),
		browsertest.Click(`input[name="id"][value="`+strconv.FormatInt(again, 10)+`"]`),
		browsertest.Click(`button[data-bulk="api/jobs/retry"]`),
		chromedp.WaitVisible(`#confirm-ok`), browsertest.Click(`#confirm-ok`))
	b.Wait(t, `(el => el !== null && el.textContent === "Since then: 1 completed, 1 failed again.")(document.getElementById("flash-after"))`)
	require.Contains(t, texts(t, b, "#flash")[0], "Retry: 2 jobs changed.")
}

// A waiting job says why in the browser as the server wrote it, after the
// page's scripts have run over its times: a job of a schedule's tick is due
// on the schedule's clock (on its page and in the jobs list); a parent
// names the parent its rule's child still waits for, linked to it; a job
// waiting for its retry says when and which attempt, and Retry now makes
// it due (audited); a job behind its closed batch window says when it
// opens; a job of a paused queue says the queue is paused.
func TestBrowserWaitingJobsSayWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "county-daily", Spec: queue.Daily(23, 0), Location: kolkata,
		Jobs: func(queue.Tick) []queue.Params { return nil }}))
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[countyRollup](func(context.Context, *queue.Job[countyRollup]) error { return nil })))
	require.NoError(t, queue.Depend(e.reg, queue.Rule{Name: "summary", Parents: []string{report{}.Kind()}},
		func([]queue.JobRecord) (countyRollup, []queue.EnqueueOption) { return countyRollup{}, nil }))
	y, m, d := time.Now().In(kolkata).Date()
	at := time.Date(y, m, d+1, 23, 0, 0, 0, kolkata)
	tick := "county-daily@" + at.Format(time.RFC3339)
	period := queue.InPeriod("2025-12-08")
	later := e.enqueue(t, report{County: "Travis"}, queue.InRun(tick), queue.RunAt(at))
	done := e.enqueue(t, report{County: "Bexar"}, period, queue.InRun("nightly@2025-12-08T23:00:00Z"))
	waited := e.enqueue(t, report{County: "Harris"}, period, queue.InRun("nightly@2025-12-08T23:00:00Z"), queue.RunAt(time.Now().Add(time.Hour)))
	e.work(t, done)

	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, fmt.Sprintf("/jobs/%d", later))
	b.Run(t, chromedp.WaitVisible("#due-zoned"))
	require.Equal(t, []string{"due tomorrow 23:00 Asia/Kolkata"}, texts(t, b, "#due-zoned"))
	require.Regexp(t, `^Due in \d+ \w+: due tomorrow 23:00 Asia/Kolkata, on schedule county-daily's clock, at `, texts(t, b, "#wait")[0])

	open(t, b, e, "/jobs")
	sel := fmt.Sprintf(`tr[data-job="%d"] [data-zoned]`, later)
	b.Run(t, chromedp.WaitVisible(sel))
	require.Equal(t, []string{"due tomorrow 23:00 Asia/Kolkata"}, texts(t, b, sel))

	open(t, b, e, fmt.Sprintf("/jobs/%d", done))
	b.Run(t, chromedp.WaitVisible(`[data-waits-for="summary"]`))
	require.Equal(t, []string{fmt.Sprintf("Rule summary's job is not created yet: it waits for parent #%d report (queued).", waited)},
		texts(t, b, `[data-waits-for="summary"]`))
	b.Screenshot(t, "job-waits-for-parent")
	b.Run(t, browsertest.Click(`[data-waits-for="summary"] a`), chromedp.WaitVisible("#status"))
	require.Equal(t, []string{"QUEUED"}, texts(t, b, "#status"))
	var path string
	b.Run(t, chromedp.Evaluate(`location.pathname`, &path))
	require.True(t, strings.HasSuffix(path, fmt.Sprintf("/jobs/%d", waited)), path)

	retrying := e.enqueue(t, report{County: "Collin"})
	e.setWaiting(t, retrying, 1, 57*time.Minute+30*time.Second)
	open(t, b, e, fmt.Sprintf("/jobs/%d", retrying))
	require.Regexp(t, `^Retry in 57 min \(attempt 2 of \d+\)`, texts(t, b, "#wait")[0])
	b.Run(t, browsertest.Click("#run-now"))
	b.Wait(t, `document.getElementById("wait").textContent.includes("waiting for a runner of queue default to take it")`)
	entries, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)
	require.Equal(t, "run_now", entries[0].Action)

	now := time.Now().UTC()
	w, err := queue.DailyWindow(now.Add(2*time.Hour).Format("15:04"), now.Add(3*time.Hour).Format("15:04"), nil)
	require.NoError(t, err)
	e.reg.QueueWindow("night", w)
	windowed := e.enqueue(t, report{County: "Travis"}, queue.OnQueue("night"))
	open(t, b, e, fmt.Sprintf("/jobs/%d", windowed))
	require.Regexp(t, `Its batch window `+regexp.QuoteMeta(w.String())+` is closed; it opens in (1|2) h\.$`, texts(t, b, "#wait")[0])

	require.NoError(t, e.client.PauseQueue(context.Background(), "default"))
	open(t, b, e, fmt.Sprintf("/jobs/%d", retrying))
	b.Wait(t, `document.querySelector("main").innerText.includes("Queue default is paused")`)
}
