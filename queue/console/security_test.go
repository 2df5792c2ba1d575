package console_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/console"
)

// changes are the requests that change state, one per such route.
var changes = []struct{ path, body string }{
	{"/api/jobs", `{"kind":"report"}`},
	{"/api/jobs/1/cancel", ""},
	{"/api/jobs/1/retry", ""},
	{"/api/jobs/cancel", `{"ids":[1]}`},
	{"/api/jobs/retry", `{"ids":[1]}`},
	{"/api/jobs/cancel", `{"filter":{"queue":"default"}}`},
	{"/api/jobs/retry", `{"filter":{"queue":"default"}}`},
	{"/api/queues/default/pause", ""},
	{"/api/queues/default/resume", ""},
}

func TestReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	e := newEnv(t, console.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.Equal(t, 1, strings.Count(logged.String(), "read-only"), "New says once that the console is read-only")
	for _, c := range changes {
		res := e.expectError(t, http.StatusForbidden, "forbidden", "POST", c.path, c.body)
		require.Contains(t, string(res.body), "WithAuthorizer", c.path)
	}
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/jobs", "").status, "reading is allowed")
	require.Equal(t, 1, strings.Count(logged.String(), "read-only"))
}

func TestAuthorizer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(func(r *http.Request) (console.Access, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer reader":
			return console.Access{Read: true, Actor: "reader"}, nil
		case "Bearer retrier":
			return console.Access{Read: true, Retry: true, Actor: "retrier"}, nil
		case "Bearer nobody":
			return console.Access{}, nil
		}
		return console.Access{}, errors.New("no valid token")
	}))
	e.expectError(t, http.StatusUnauthorized, "unauthorized", "GET", "/api/jobs", "")
	e.expectError(t, http.StatusUnauthorized, "unauthorized", "POST", "/api/jobs", `{"kind":"report"}`)
	e.expectError(t, http.StatusForbidden, "forbidden", "GET", "/api/jobs", "", "Authorization", "Bearer nobody")
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/stats", "", "Authorization", "Bearer reader").status)
	for _, c := range changes {
		e.expectError(t, http.StatusForbidden, "forbidden", "POST", c.path, c.body, "Authorization", "Bearer reader")
	}
	e.expectError(t, http.StatusForbidden, "forbidden", "POST", "/api/jobs/1/cancel", "", "Authorization", "Bearer retrier")
	e.expectError(t, http.StatusNotFound, "not_found", "POST", "/api/jobs/1/retry", "", "Authorization", "Bearer retrier")
}

func TestAccessAllows(t *testing.T) {
	a := console.Access{Read: true, Cancel: true}
	require.True(t, a.Allows(console.ActionRead))
	require.True(t, a.Allows(console.ActionCancel))
	for _, act := range []console.Action{console.ActionSubmit, console.ActionRetry, console.ActionPause, "other"} {
		require.False(t, a.Allows(act), act)
	}
	all := console.Access{Submit: true, Retry: true, Pause: true}
	require.True(t, all.Allows(console.ActionSubmit) && all.Allows(console.ActionRetry) && all.Allows(console.ActionPause))
}

func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll), console.WithTrustedOrigins("https://ops.example.com"))
	for _, c := range changes {
		e.expectError(t, http.StatusForbidden, "cross_origin", "POST", c.path, c.body, "Sec-Fetch-Site", "cross-site")
		e.expectError(t, http.StatusForbidden, "cross_origin", "POST", c.path, c.body, "Origin", "https://evil.example")
	}
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/api/jobs", "", "Sec-Fetch-Site", "cross-site").status,
		"reads are safe from any origin")
	res := e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusCreated, res.status, "body: %s", res.body)
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "Sec-Fetch-Site", "cross-site", "Origin", "https://ops.example.com")
	require.Equal(t, http.StatusCreated, res.status, "a trusted origin passes: %s", res.body)
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`) // curl: no browser headers
	require.Equal(t, http.StatusCreated, res.status)
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := console.New(nil)
	require.Error(t, err)
	for _, opt := range []console.Option{nil, console.WithAuthorizer(nil), console.WithSubmitter(nil),
		console.WithArgsFormatter(nil), console.WithTrustedOrigins("not a url")} {
		_, err := console.New(e.client, opt)
		require.Error(t, err)
	}
	_, err = console.New(e.client, console.WithLogger(nil), console.WithAuthorizer(allowAll))
	require.NoError(t, err, "a nil logger discards")
}

func TestUnroutedRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.expectError(t, http.StatusNotFound, "no_route", "GET", "/api/nothing", "")
	e.expectError(t, http.StatusNotFound, "no_route", "POST", "/nothing", "")
	res := e.expectError(t, http.StatusMethodNotAllowed, "method_not_allowed", "DELETE", "/api/jobs/1", "")
	require.Contains(t, res.header.Get("Allow"), "GET")
	e.expectError(t, http.StatusMethodNotAllowed, "method_not_allowed", "POST", "/api/stats", "")
}

func TestMountedUnderAPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := console.New(e.client, console.WithLogger(quiet()))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	e.srv.Config.Handler = mux
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/ops/api/health", "").status)
	require.Equal(t, http.StatusNotFound, e.do(t, "GET", "/api/health", "").status)
}
