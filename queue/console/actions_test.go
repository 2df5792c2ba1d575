package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

func TestCancelAndRetryOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "A"})
	path := fmt.Sprintf("/api/jobs/%d", id)

	res := e.do(t, "POST", path+"/cancel", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	require.Equal(t, "CANCELLED", jobOf(t, res)["status"])
	e.expectError(t, http.StatusConflict, "wrong_status", "POST", path+"/cancel", "")

	res = e.do(t, "POST", path+"/retry", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	require.Equal(t, "QUEUED", jobOf(t, res)["status"])
	e.expectError(t, http.StatusConflict, "wrong_status", "POST", path+"/retry", "")

	e.expectError(t, http.StatusNotFound, "not_found", "POST", "/api/jobs/99999999/cancel", "")
	e.expectError(t, http.StatusNotFound, "not_found", "POST", "/api/jobs/99999999/retry", "")
	e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/x/retry", "")
}

func TestBulkCancelAndRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	ctx := context.Background()
	a := e.enqueue(t, report{County: "A"})
	b := e.enqueue(t, report{County: "B"})
	c := e.enqueue(t, report{County: "C"})

	var out struct {
		Changed int64 `json:"changed"`
		Refused []struct {
			ID    int64 `json:"id"`
			Error struct{ Code string }
		} `json:"refused"`
		AuditID  int64  `json:"audit_id"`
		AuditURL string `json:"audit_url"`
	}
	res := e.do(t, "POST", "/api/jobs/cancel", jsonBody(t, map[string]any{"ids": []int64{a, b, 99999999}}))
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, int64(2), out.Changed)
	require.Len(t, out.Refused, 1)
	require.Equal(t, int64(99999999), out.Refused[0].ID)
	require.Equal(t, "not_found", out.Refused[0].Error.Code)
	// The answer names its audit entry, and the audit page that starts
	// at it, though later entries come before it in the log.
	audit, err := e.client.AuditLog(ctx, 0, 1)
	require.NoError(t, err)
	require.Equal(t, audit[0].ID, out.AuditID)
	e.do(t, "POST", "/api/queues/default/pause", "")
	e.do(t, "POST", "/api/queues/default/resume", "")
	path, frag, ok := strings.Cut(out.AuditURL, "#")
	require.True(t, ok, out.AuditURL)
	require.Equal(t, fmt.Sprintf("audit-%d", out.AuditID), frag)
	page := e.page(t, "/"+path, http.StatusOK)
	rows := regexp.MustCompile(`<tr data-audit="(\d+)" id="audit-(\d+)">`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, rows)
	require.Equal(t, []string{rows[0][0], strconv.FormatInt(out.AuditID, 10), strconv.FormatInt(out.AuditID, 10)}, rows[0])

	out.Refused = nil
	res = e.do(t, "POST", "/api/jobs/retry", jsonBody(t, map[string]any{"ids": []int64{a, c}}))
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, int64(1), out.Changed)
	require.Len(t, out.Refused, 1)
	require.Equal(t, "wrong_status", out.Refused[0].Error.Code, "a queued job cannot be retried")

	for _, body := range []string{`{}`, `{"ids":[]}`, `{"ids":[1],"filter":{}}`} {
		e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/retry", body)
	}
	e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/cancel", `{"ids":[]}`)
	e.expectError(t, http.StatusBadRequest, "unknown_field", "POST", "/api/jobs/cancel", `{"filter":{"status":"QUEUED"}}`)
	e.expectError(t, http.StatusBadRequest, "unknown_field", "POST", "/api/jobs/retry", `{"filter":{"status":"FAILED"}}`)
	many := make([]int64, 1001)
	e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/cancel", jsonBody(t, map[string]any{"ids": many}))

	// A filter retries the FAILED jobs it selects.
	f1 := e.enqueue(t, report{County: "F1", Fail: true}, queue.InRun("nightly@1"))
	f2 := e.enqueue(t, report{County: "F2", Fail: true}, queue.InRun("nightly@2"))
	e.work(t, b, c, f1, f2)
	res = e.do(t, "POST", "/api/jobs/retry", `{"filter":{"run":"nightly@1"}}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, int64(1), out.Changed)
	rec, err := e.client.Get(ctx, f1)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	rec, err = e.client.Get(ctx, f2)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, rec.Status)
	e.expectError(t, http.StatusBadRequest, "invalid_option", "POST", "/api/jobs/retry", `{"filter":{"queue":"a\u0000"}}`)
}

// A cancel's reason, by one job, by IDs or by filter, is recorded in its
// audit entry and shown on the job's page, in its run's review and in the
// audit log; one of more than 500 characters is refused before anything
// is cancelled.
func TestCancelWithAReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run = "nightly@2025-12-08T23:00:00Z"
	later := queue.RunAt(time.Now().Add(time.Hour))
	one := e.enqueue(t, report{County: "Travis"}, queue.InRun(run), later)
	byIDs := e.enqueue(t, report{County: "Harris"}, later)
	byFilter := e.enqueue(t, report{County: "Bexar"}, queue.InRun("hourly@1"), later)

	long := strings.Repeat("é", console.MaxReason+1)
	e.expectError(t, http.StatusBadRequest, "reason_too_long", "POST", fmt.Sprintf("/api/jobs/%d/cancel", one), jsonBody(t, map[string]any{"reason": long}))
	e.expectError(t, http.StatusBadRequest, "reason_too_long", "POST", "/api/jobs/cancel", jsonBody(t, map[string]any{"ids": []int64{byIDs}, "reason": long}))
	e.expectError(t, http.StatusBadRequest, "unknown_field", "POST", fmt.Sprintf("/api/jobs/%d/cancel", one), `{"why":"x"}`)
	for _, id := range []int64{one, byIDs} {
		j, err := e.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, queue.StatusQueued, j.Status, "a refused reason cancels nothing")
	}
	_, err := console.CheckReason(long)
	require.ErrorIs(t, err, console.ErrReasonTooLong)
	ok, err := console.CheckReason("  " + strings.Repeat("é", console.MaxReason) + " ")
	require.NoError(t, err)
	require.Len(t, []rune(ok), console.MaxReason)

	res := e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", one), `{"reason":" the county <b>withdrew</b> "}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res = e.do(t, "POST", "/api/jobs/cancel", jsonBody(t, map[string]any{"ids": []int64{byIDs}, "reason": "duplicate of a later run"}))
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res = e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"run":"hourly@1"},"reason":"hourly runs are off tonight"}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)

	var audit struct {
		Entries []struct {
			Target map[string]any `json:"target"`
			Reason string         `json:"reason"`
		} `json:"entries"`
	}
	e.do(t, "GET", "/api/audit?limit=3", "").decode(t, &audit)
	require.Len(t, audit.Entries, 3)
	require.Equal(t, []string{"hourly runs are off tonight", "duplicate of a later run", "the county <b>withdrew</b>"},
		[]string{audit.Entries[0].Reason, audit.Entries[1].Reason, audit.Entries[2].Reason})
	require.Equal(t, "the county <b>withdrew</b>", audit.Entries[2].Target["reason"])
	require.Equal(t, float64(one), audit.Entries[2].Target["job"])

	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", one), http.StatusOK),
		`<span id="cancel-reason-given">Reason: “the county &lt;b&gt;withdrew&lt;/b&gt;”.</span>`)
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", byIDs), http.StatusOK), `Reason: “duplicate of a later run”.`)
	require.Contains(t, e.page(t, fmt.Sprintf("/jobs/%d", byFilter), http.StatusOK), `Reason: “hourly runs are off tonight”.`)
	page := e.page(t, "/audit", http.StatusOK)
	require.Contains(t, page, `<span data-reason>because “the county &lt;b&gt;withdrew&lt;/b&gt;”</span>`)
	require.Contains(t, page, `<span data-reason>because “hourly runs are off tonight”</span>`)
	never := regexp.MustCompile(`(?s)<section aria-labelledby="never-h".*?</section>`).FindString(e.page(t, "/runs/"+run, http.StatusOK))
	require.Contains(t, never, `, because “the county &lt;b&gt;withdrew&lt;/b&gt;”</span>`)
	var rv struct {
		Review struct {
			Cancelled []struct {
				Reason string `json:"reason"`
			} `json:"cancelled"`
		} `json:"review"`
	}
	e.do(t, "GET", "/api/runs/"+run+"/review", "").decode(t, &rv)
	require.Len(t, rv.Review.Cancelled, 1)
	require.Equal(t, "the county <b>withdrew</b>", rv.Review.Cancelled[0].Reason)
}
