package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// A due job that a limit holds back says which, and how far it is used;
// once the limit has room, it says so no more.
func TestJobPageSaysWhichLimitHoldsItBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	require.NoError(t, e.client.SetLimit(ctx, queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 1}))
	running := e.enqueue(t, report{County: "Harris"})
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'PROCESSING', locked_until = run_at WHERE id = ?", running).Error)
	waiting := e.enqueue(t, report{County: "Travis"})
	page := e.page(t, fmt.Sprintf("/jobs/%d", waiting), http.StatusOK)
	require.Contains(t, page, "Held back: limit kind report reached (1 of 1 running).")

	require.NoError(t, e.client.SetLimit(ctx, queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 2}))
	require.NotContains(t, e.page(t, fmt.Sprintf("/jobs/%d", waiting), http.StatusOK), "Held back")
}

// The limits page lists them with their use; an operator allowed to pause
// queues sets, suspends and removes them, each change in the audit log;
// a read-only console refuses to.
func TestLimitsThroughTheConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	require.Contains(t, e.page(t, "/limits", http.StatusOK), "No limit is set.")

	res := e.do(t, "POST", "/api/limits", `{"scope":"kind","target":"report","concurrency":5,"rate":100,"per_seconds":60}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var got struct {
		Limits []struct {
			Scope, Target, By, Use string
			Concurrency, Rate      int
			PerSeconds             float64 `json:"per_seconds"`
			Suspended, Reached     bool
		}
	}
	res.decode(t, &got)
	require.Len(t, got.Limits, 1)
	require.Equal(t, "tester", got.Limits[0].By)
	require.Equal(t, "limit kind report in use (0 of 5 running, 0 of 100 started in 1m)", got.Limits[0].Use)
	page := e.page(t, "/limits", http.StatusOK)
	require.Contains(t, page, `data-limit="kind report"`)
	require.Contains(t, page, ">Suspend</button>")

	res = e.do(t, "POST", "/api/limits", `{"scope":"kind","target":"report","concurrency":5,"suspended":true}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	require.Contains(t, e.page(t, "/limits", http.StatusOK), ">Resume</button>")
	e.expectError(t, http.StatusBadRequest, "invalid_option", "POST", "/api/limits", `{"scope":"tenant","target":"x","concurrency":1}`)

	res = e.do(t, "POST", "/api/limits/remove", `{"scope":"kind","target":"report"}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	e.expectError(t, http.StatusNotFound, "not_found", "POST", "/api/limits/remove", `{"scope":"kind","target":"report"}`)

	log, err := e.client.AuditLog(ctx, 0, 10)
	require.NoError(t, err)
	var actions []string
	for _, a := range log {
		actions = append(actions, a.Action+" "+a.Result)
	}
	require.Equal(t, []string{"remove limit not_found", "remove limit ok", "limit invalid_option", "limit ok", "limit ok"}, actions)

	// A fair key limit keeps its weights through the API, and its Suspend
	// button keeps them too.
	res = e.do(t, "POST", "/api/limits", `{"scope":"key","target":"report","fair":true,"weights":{"acme":3}}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var fair struct {
		Limits []struct {
			Fair    bool
			Weights map[string]int
		}
	}
	res.decode(t, &fair)
	require.Len(t, fair.Limits, 1)
	require.True(t, fair.Limits[0].Fair)
	require.Equal(t, map[string]int{"acme": 3}, fair.Limits[0].Weights)
	require.Contains(t, e.page(t, "/limits", http.StatusOK),
		`data-body="{&#34;scope&#34;:&#34;key&#34;,&#34;target&#34;:&#34;report&#34;,&#34;concurrency&#34;:0,&#34;rate&#34;:0,&#34;per_seconds&#34;:0,&#34;fair&#34;:true,&#34;weights&#34;:{&#34;acme&#34;:3},&#34;suspended&#34;:true}"`)
	e.expectError(t, http.StatusBadRequest, "invalid_option", "POST", "/api/limits",
		`{"scope":"key","target":"report","fair":true,"weights":{"acme":0}}`)

	readOnly := newEnv(t)
	require.Equal(t, http.StatusForbidden, readOnly.do(t, "POST", "/api/limits", `{"scope":"kind","target":"report","concurrency":1}`).status)
	require.NotContains(t, readOnly.page(t, "/limits", http.StatusOK), "<th scope=\"col\">Change</th>")
}

// An operator creates a limit with the page's form, changes its N and R
// through its Change button, and removes it; each change reaches the
// runners' limits (Client.Limits) and the audit log, and a refused one
// says why on the page.
func TestBrowserLimitFormSetsAndChangesLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	e.enqueue(t, report{County: "Harris"}, queue.OnQueue("exports"))
	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e, "/limits")
	require.ElementsMatch(t, []string{"report", "exports"}, attrs(t, b, "#limit-targets option", "value"))

	b.Run(t, chromedp.SetValue(`#limit-form select[name="scope"]`, "kind"),
		browsertest.Type(`#limit-form input[name="target"]`, "report"),
		chromedp.SetValue(`#limit-form input[name="concurrency"]`, "3"),
		browsertest.Click(`#limit-form button[type="submit"]`))
	b.Wait(t, `document.querySelector('tr[data-limit="kind report"]') !== null`)
	require.Equal(t, []string{"Limit set: kind report."}, texts(t, b, "#flash"))
	require.Equal(t, []string{"3"}, texts(t, b, `tr[data-limit="kind report"] td[data-col="concurrency"]`))
	ls, err := e.client.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 3, By: "tester"}, ls[0].Limit)

	// Change fills the form with the limit; the operator raises N and adds
	// a rate.
	b.Run(t, browsertest.Click(`tr[data-limit="kind report"] button[data-edit-limit]`))
	b.Wait(t, `document.querySelector('#limit-form input[name="target"]').value === "report"`)
	require.Equal(t, "3", value(t, b, `#limit-form input[name="concurrency"]`))
	b.Run(t, chromedp.SetValue(`#limit-form input[name="concurrency"]`, "8"),
		chromedp.SetValue(`#limit-form input[name="rate"]`, "100"),
		chromedp.SetValue(`#limit-form input[name="per_seconds"]`, "60"),
		browsertest.Click(`#limit-form button[type="submit"]`))
	b.Wait(t, `document.querySelector('tr[data-limit="kind report"] td[data-col="concurrency"]').textContent === "8"`)
	require.Equal(t, []string{"100 per minute"}, texts(t, b, `tr[data-limit="kind report"] td[data-col="rate"]`))
	ls, err = e.client.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 8, Rate: 100, Per: time.Minute, By: "tester"}, ls[0].Limit)
	b.Screenshot(t, "limits-changed")

	// A limit of nothing is refused, and the page says why.
	b.Run(t, browsertest.Type(`#limit-form input[name="target"]`, "exports"),
		chromedp.SetValue(`#limit-form select[name="scope"]`, "queue"),
		browsertest.Click(`#limit-form button[type="submit"]`))
	b.Wait(t, `document.getElementById("flash").classList.contains("bad")`)
	require.Contains(t, texts(t, b, "#flash")[0], "sets neither a concurrency")

	b.Run(t, browsertest.Click(`tr[data-limit="kind report"] button[data-post="api/limits/remove"]`))
	b.Wait(t, `document.getElementById("confirm").open`)
	b.Run(t, browsertest.Click("#confirm-ok"))
	b.Wait(t, `document.querySelector('tr[data-limit]') === null`)
	ls, err = e.client.Limits(ctx)
	require.NoError(t, err)
	require.Empty(t, ls)

	var actions []string
	for _, a := range e.audit(t, 10) {
		actions = append(actions, a.Action+" "+a.Result)
	}
	require.Equal(t, []string{"remove limit ok", "limit invalid_option", "limit ok", "limit ok"}, actions)
}

// attrs returns the attribute name of every element sel matches.
func attrs(t *testing.T, b *browsertest.Browser, sel, name string) []string {
	t.Helper()
	var out []string
	b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll(`+strconv.Quote(sel)+`)].map(e => e.getAttribute(`+strconv.Quote(name)+`))`, &out))
	return out
}

// value returns the value of the form field sel matches.
func value(t *testing.T, b *browsertest.Browser, sel string) string {
	t.Helper()
	var out string
	b.Run(t, chromedp.Evaluate(`document.querySelector(`+strconv.Quote(sel)+`).value`, &out))
	return out
}
