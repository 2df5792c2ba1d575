package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

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
