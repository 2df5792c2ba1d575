package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/queue/alert"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// alertEnv is a console with alerts, and a report job that failed for
// good, whose episode fires.
type alertEnv struct {
	*env
	alerter *alert.Alerter
	sent    chan alert.Notice
	failed  int64
}

func newAlertEnv(t *testing.T, authorize console.Authorizer) *alertEnv {
	t.Helper()
	db, reg, c := newClient(t)
	sent := make(chan alert.Notice, 10)
	a, err := alert.New(c, alert.WithRules(alert.Dead()), alert.WithLogger(quiet()),
		alert.WithSink("test", alert.SinkFunc(func(_ context.Context, n alert.Notice) error { sent <- n; return nil })))
	require.NoError(t, err)
	h, err := console.New(c, console.WithLogger(quiet()), console.WithCountsCache(0), console.WithAuthorizer(authorize), console.WithAlerts(a))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &alertEnv{env: &env{db: db, reg: reg, client: c, srv: srv, h: h}, alerter: a, sent: sent}
	e.failed = e.enqueue(t, report{County: "Kent", Fail: true})
	e.work(t, e.failed)
	_, err = a.Run(context.Background())
	require.NoError(t, err)
	require.Len(t, sent, 1)
	return e
}

// The alerts API lists episodes and silences; a caller allowed to silence
// silences a rule and removes the silence, each in the audit log; a
// caller who is not is refused; bad requests get typed errors. The
// OpenAPI document lists the routes.
func TestAlertsAPI(t *testing.T) {
	t.Parallel()
	e := newAlertEnv(t, func(r *http.Request) (console.Access, error) {
		acc, _ := allowAll(r)
		acc.Silence = r.Header.Get("X-Actor") != "reader"
		return acc, nil
	})
	var eps struct {
		Episodes []struct {
			ID       int64  `json:"id"`
			Rule     string `json:"rule"`
			Key      string `json:"key"`
			State    string `json:"state"`
			Notified bool   `json:"notified"`
		} `json:"episodes"`
		NextBefore int64 `json:"next_before"`
	}
	res := e.do(t, "GET", "/api/alerts?state=firing", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &eps)
	require.Len(t, eps.Episodes, 1)
	require.Equal(t, fmt.Sprintf("job %d", e.failed), eps.Episodes[0].Key)
	require.True(t, eps.Episodes[0].Notified)
	e.do(t, "GET", "/api/alerts?state=resolved", "").decode(t, &eps)
	require.Empty(t, eps.Episodes)

	res = e.do(t, "POST", "/api/alerts/silences", `{"rule":"dead","kind":"report","minutes":30,"reason":"known"}`)
	require.Equal(t, http.StatusCreated, res.status, "body: %s", res.body)
	var created struct {
		Silence struct {
			ID    int64     `json:"id"`
			Actor string    `json:"actor"`
			Until time.Time `json:"until"`
		} `json:"silence"`
	}
	res.decode(t, &created)
	require.Equal(t, "tester", created.Silence.Actor)
	require.WithinDuration(t, time.Now().Add(30*time.Minute), created.Silence.Until, time.Minute)
	var ss struct {
		Silences []struct {
			ID     int64  `json:"id"`
			Rule   string `json:"rule"`
			Reason string `json:"reason"`
		} `json:"silences"`
	}
	e.do(t, "GET", "/api/alerts/silences", "").decode(t, &ss)
	require.Len(t, ss.Silences, 1)
	require.Equal(t, "known", ss.Silences[0].Reason)

	e.expectError(t, http.StatusForbidden, "forbidden", "POST", fmt.Sprintf("/api/alerts/silences/%d/delete", created.Silence.ID), "", "X-Actor", "reader")
	res = e.do(t, "POST", fmt.Sprintf("/api/alerts/silences/%d/delete", created.Silence.ID), "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	e.expectError(t, http.StatusNotFound, "not_found", "POST", fmt.Sprintf("/api/alerts/silences/%d/delete", created.Silence.ID), "")
	e.expectError(t, http.StatusBadRequest, "invalid_param", "POST", "/api/alerts/silences/x/delete", "")
	for _, body := range []string{`{"rule":"dead"}`, `{"rule":"dead","minutes":5,"until":"2030-01-01T00:00:00Z"}`,
		`{"rule":"dead","minutes":100000}`, `{"rule":"dead","until":"2099-01-01T00:00:00Z"}`} {
		e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/alerts/silences", body)
	}
	e.expectError(t, http.StatusBadRequest, "invalid", "POST", "/api/alerts/silences", `{"minutes":5}`)
	e.expectError(t, http.StatusBadRequest, "invalid", "POST", "/api/alerts/silences", `{"rule":"dead","until":"2001-01-01T00:00:00Z"}`)
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/alerts?limit=0", "")
	e.expectError(t, http.StatusBadRequest, "invalid", "GET", "/api/alerts?state=open", "")

	audit := e.audit(t, 100)
	var did []string
	for _, a := range audit {
		did = append(did, a.Action+" "+a.Result)
	}
	require.Contains(t, did, "silence ok")
	require.Contains(t, did, "unsilence ok")
	require.Contains(t, did, "unsilence not_found")
	for _, a := range audit {
		if a.Action == "silence" && a.Result == "ok" {
			var target map[string]any
			require.NoError(t, json.Unmarshal(a.Target, &target))
			require.Equal(t, "dead", target["rule"])
			require.Equal(t, float64(created.Silence.ID), target["silence"])
		}
	}

	doc := e.do(t, "GET", "/api/openapi.json", "").json(t)["paths"].(map[string]any)
	for _, p := range []string{"/api/alerts", "/api/alerts/silences", "/api/alerts/silences/{id}/delete"} {
		require.Contains(t, doc, p)
	}
	// Without WithAlerts there are none.
	plain := newEnv(t)
	require.NotContains(t, plain.do(t, "GET", "/api/openapi.json", "").json(t)["paths"], "/api/alerts")
	require.NotContains(t, plain.page(t, "/", http.StatusOK), `href="alerts"`)
}

// The Alerts page shows what fires; its buttons silence the rule and
// remove the silence, and the page shows each change.
func TestBrowserAlertsPage(t *testing.T) {
	t.Parallel()
	e := newAlertEnv(t, func(r *http.Request) (console.Access, error) {
		acc, _ := allowAll(r)
		acc.Silence = true
		return acc, nil
	})
	b := browsertest.New(t, desktopW, desktopH)
	open(t, b, e.env, "/alerts")
	firing := texts(t, b, "tr[data-episode]")
	require.Len(t, firing, 1)
	require.Contains(t, firing[0], fmt.Sprintf("job %d", e.failed))
	require.Equal(t, []string{"No silences."}, texts(t, b, "tr:has(td[colspan='7'])"))

	b.Run(t, browsertest.Click(`tr[data-episode] button[data-post]`))
	b.Wait(t, `document.querySelectorAll("tr[data-silence]").length === 1`)
	row := texts(t, b, "tr[data-silence]")[0]
	require.Contains(t, row, "dead")
	require.Contains(t, row, "tester")
	require.Contains(t, texts(t, b, "#flash")[0], "silenced")
	ss, err := e.alerter.Silences(context.Background())
	require.NoError(t, err)
	require.Len(t, ss, 1)
	b.Screenshot(t, "alerts-silenced")

	b.Run(t, browsertest.Click(`tr[data-silence] button[data-post]`))
	b.Wait(t, `document.querySelectorAll("tr[data-silence]").length === 0`)
	ss, err = e.alerter.Silences(context.Background())
	require.NoError(t, err)
	require.Empty(t, ss)
	require.True(t, strings.Contains(strings.Join(texts(t, b, "nav a"), " "), "Alerts"))
	require.Empty(t, axe(t, b), "/alerts")

	phone := browsertest.New(t, 390, 844)
	open(t, phone, e.env, "/alerts")
	require.Empty(t, wideOnAPhone(t, phone), "/alerts scrolls sideways on the phone")
}
