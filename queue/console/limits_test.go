package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

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
	require.Equal(t, "limit kind report in use (0 of 5 running, 0 of 100 started in 1m0s)", got.Limits[0].Use)
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

	readOnly := newEnv(t)
	require.Equal(t, http.StatusForbidden, readOnly.do(t, "POST", "/api/limits", `{"scope":"kind","target":"report","concurrency":1}`).status)
	require.NotContains(t, readOnly.page(t, "/limits", http.StatusOK), "<th scope=\"col\">Change</th>")
}
