package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// startRunner starts a runner that polls every 20ms, stopped at the
// test's end.
func (e *env) startRunner(t *testing.T, opts ...queue.RunnerOption) *queue.Runner {
	return queuetest.StartRunner(t, e.client, append([]queue.RunnerOption{queue.WithPollInterval(20 * time.Millisecond)}, opts...)...)
}

// status returns the status of job id.
func (e *env) status(t *testing.T, id int64) queue.Status {
	t.Helper()
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	return rec.Status
}

func TestCancelByFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	done := e.enqueue(t, report{County: "E"}, queue.InRun("nightly@1"))
	e.work(t, done)
	hit1 := e.enqueue(t, report{County: "A"}, queue.InRun("nightly@1"))
	hit2 := e.enqueue(t, report{County: "B"}, queue.InRun("nightly@1"))
	otherRun := e.enqueue(t, report{County: "C"}, queue.InRun("nightly@2"))
	otherQueue := e.enqueue(t, report{County: "D"}, queue.InRun("nightly@1"), queue.OnQueue("other"))

	var out struct {
		Changed int64 `json:"changed"`
	}
	res := e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"run":"nightly@1","queue":"default"}}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, int64(2), out.Changed)
	for id, want := range map[int64]queue.Status{hit1: queue.StatusCancelled, hit2: queue.StatusCancelled,
		otherRun: queue.StatusQueued, otherQueue: queue.StatusQueued, done: queue.StatusCompleted} {
		require.Equal(t, want, e.status(t, id), "job %d", id)
	}

	// By search: the county's name is in the arguments.
	res = e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"q":"\"D\""}}`)
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, int64(1), out.Changed)
	require.Equal(t, queue.StatusCancelled, e.status(t, otherQueue))
	require.Equal(t, queue.StatusQueued, e.status(t, otherRun))

	for _, body := range []string{`{"filter":{}}`, `{"filter":{"kinds":[]}}`, `{"ids":[1],"filter":{"run":"x"}}`, `{}`} {
		e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs/cancel", body)
	}
	require.Equal(t, queue.StatusQueued, e.status(t, otherRun), "nothing refused cancelled anything")
}

// TestPauseAcrossRunners pauses a queue two runners work: the jobs
// enqueued then stay QUEUED while each runner polls twice, and complete
// once it is resumed.
func TestPauseAcrossRunners(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	r1, r2 := e.startRunner(t, queue.WithQueues("default", "other")), e.startRunner(t, queue.WithQueues("default", "other"))

	res := e.do(t, "POST", "/api/queues/default/pause", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var one struct {
		Queue struct {
			Name     string     `json:"name"`
			Paused   bool       `json:"paused"`
			PausedAt *time.Time `json:"paused_at"`
		} `json:"queue"`
	}
	res.decode(t, &one)
	require.Equal(t, "default", one.Queue.Name)
	require.True(t, one.Queue.Paused)
	require.NotNil(t, one.Queue.PausedAt)

	queuetest.WaitPolls(t, 1, r1, r2) // both have begun a poll since the pause was written
	var ids []int64
	for i := range 4 {
		ids = append(ids, e.enqueue(t, report{County: fmt.Sprint(i)}))
	}
	elsewhere := e.enqueue(t, report{County: "elsewhere"}, queue.OnQueue("other"))
	queuetest.WaitPolls(t, 3, r1, r2) // two full polls each, at least, after the jobs were there
	for _, id := range ids {
		require.Equal(t, queue.StatusQueued, e.status(t, id), "job %d of the paused queue", id)
	}
	_, err := e.client.Wait(t.Context(), elsewhere)
	require.NoError(t, err, "another queue goes on")

	var list struct {
		Queues []struct {
			Name   string                 `json:"name"`
			Counts map[queue.Status]int64 `json:"counts"`
			Paused bool                   `json:"paused"`
		} `json:"queues"`
	}
	res = e.do(t, "GET", "/api/queues", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &list)
	require.Len(t, list.Queues, 2)
	require.Equal(t, "default", list.Queues[0].Name)
	require.True(t, list.Queues[0].Paused)
	require.Equal(t, int64(4), list.Queues[0].Counts[queue.StatusQueued])
	require.Equal(t, "other", list.Queues[1].Name)
	require.False(t, list.Queues[1].Paused)
	require.Equal(t, int64(1), list.Queues[1].Counts[queue.StatusCompleted])

	res = e.do(t, "POST", "/api/queues/default/resume", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &one)
	require.False(t, one.Queue.Paused)
	wait, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	recs, err := e.client.Wait(wait, ids...)
	require.NoError(t, err)
	for _, rec := range recs {
		require.Equal(t, queue.StatusCompleted, rec.Status)
	}

	res = e.do(t, "POST", "/api/queues/never-used/resume", "")
	require.Equal(t, http.StatusOK, res.status, "resuming a queue that is not paused changes nothing: %s", res.body)
	e.expectError(t, http.StatusBadRequest, "invalid_option", "POST", "/api/queues/"+string(bytes.Repeat([]byte("q"), 200))+"/pause", "")
}

func TestJobAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	id := e.enqueue(t, report{County: "Harris", Fail: true})
	e.work(t, id)
	res := e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/retry", id), "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	e.work(t, id)
	ok := e.enqueue(t, report{County: "Bexar"})
	e.work(t, ok)

	type attempt struct {
		Number     int        `json:"number"`
		Runner     string     `json:"runner"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
		Outcome    string     `json:"outcome"`
		Error      string     `json:"error"`
	}
	var out struct {
		Job struct {
			Status   string  `json:"status"`
			LockedBy *string `json:"locked_by"`
		} `json:"job"`
		Attempts []attempt `json:"attempts"`
	}
	res = e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", id), "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &out)
	require.Equal(t, "FAILED", out.Job.Status)
	require.Len(t, out.Attempts, 2)
	for i, a := range out.Attempts {
		require.Equal(t, i+1, a.Number)
		require.NotEmpty(t, a.Runner)
		require.NotNil(t, a.StartedAt)
		require.NotNil(t, a.FinishedAt)
		require.Equal(t, queue.OutcomeFailed, a.Outcome)
		require.Contains(t, a.Error, "county Harris: upstream returned 503")
	}

	out.Attempts = nil
	res = e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", ok), "")
	res.decode(t, &out)
	require.Len(t, out.Attempts, 1)
	require.Equal(t, queue.OutcomeCompleted, out.Attempts[0].Outcome)
	require.NotNil(t, out.Job.LockedBy, "a completed job names the runner that completed it")
	require.Equal(t, *out.Job.LockedBy, out.Attempts[0].Runner)

	fresh := e.enqueue(t, report{County: "new"})
	res = e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", fresh), "")
	require.Equal(t, []any{}, res.json(t)["attempts"], "a job that never ran has none")
}

func TestRunnersAndHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var health struct {
		Status string `json:"status"`
		Schema struct {
			Version int `json:"version"`
			Latest  int `json:"latest"`
		} `json:"schema"`
		RecentRunners *int `json:"recent_runners"`
	}
	res := e.do(t, "GET", "/api/health", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	res.decode(t, &health)
	require.Equal(t, "ok", health.Status)
	require.Equal(t, queue.SchemaVersion, health.Schema.Version)
	require.Equal(t, queue.SchemaVersion, health.Schema.Latest)
	require.NotNil(t, health.RecentRunners)
	require.Zero(t, *health.RecentRunners)

	r := e.startRunner(t, queue.WithRunnerID("night-1"), queue.WithQueues("default", "other"), queue.WithWorkers(3))
	queuetest.WaitPolls(t, 1, r)
	var out struct {
		Runners []struct {
			ID      string    `json:"id"`
			Queues  []string  `json:"queues"`
			Workers int       `json:"workers"`
			SeenAt  time.Time `json:"seen_at"`
			Started time.Time `json:"started_at"`
			Leader  bool      `json:"leader"`
		} `json:"runners"`
	}
	require.Eventually(t, func() bool { // the only runner leads the maintenance
		e.do(t, "GET", "/api/runners", "").decode(t, &out)
		return len(out.Runners) == 1 && out.Runners[0].Leader
	}, 10*time.Second, 5*time.Millisecond)
	// A runner writes it was seen once a poll interval; on a loaded machine
	// its last sighting may be a few seconds old.
	for _, q := range []string{"", "?within=5m", "?within=30s"} {
		res = e.do(t, "GET", "/api/runners"+q, "")
		require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
		res.decode(t, &out)
		require.Len(t, out.Runners, 1, q)
		require.Equal(t, "night-1", out.Runners[0].ID)
		require.Equal(t, []string{"default", "other"}, out.Runners[0].Queues)
		require.Equal(t, 3, out.Runners[0].Workers)
		require.False(t, out.Runners[0].SeenAt.Before(out.Runners[0].Started))
	}
	res = e.do(t, "GET", "/api/health", "")
	res.decode(t, &health)
	require.Equal(t, 1, *health.RecentRunners)
	for _, q := range []string{"within=0s", "within=25h", "within=soon", "within=5"} {
		e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/runners?"+q, "")
	}
}

// auditEntry is an entry of GET /api/audit.
type auditEntry struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Target  json.RawMessage `json:"target"`
	Result  string          `json:"result"`
	Changed int64           `json:"changed"`
}

// audit reads the whole audit log, newest first, a page of limit at a time.
func (e *env) audit(t *testing.T, limit int) []auditEntry {
	t.Helper()
	var all []auditEntry
	cursor := ""
	for {
		res := e.do(t, "GET", fmt.Sprintf("/api/audit?limit=%d&cursor=%s", limit, cursor), "")
		require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
		var page struct {
			Entries    []auditEntry `json:"entries"`
			NextCursor string       `json:"next_cursor"`
		}
		res.decode(t, &page)
		require.LessOrEqual(t, len(page.Entries), limit)
		all = append(all, page.Entries...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// TestAuditEveryChange makes one request of each kind that changes state,
// some of them refused, and finds each in the audit log, newest first.
func TestAuditEveryChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(func(r *http.Request) (console.Access, error) {
		acc, _ := allowAll(r)
		acc.Actor = r.Header.Get("X-Actor")
		if acc.Actor == "reader" {
			acc = console.Access{Read: true, Actor: "reader"}
		}
		return acc, nil
	}))
	as := func(actor string) []string { return []string{"X-Actor", actor} }
	res := e.do(t, "POST", "/api/jobs", `{"kind":"report","args":{"county":"A"},"idempotency_key":"k"}`, as("ana")...)
	require.Equal(t, http.StatusCreated, res.status)
	id := idOf(jobOf(t, res))
	e.do(t, "POST", "/api/jobs", `{"kind":"report","idempotency_key":"k"}`, as("ana")...)
	e.do(t, "POST", "/api/jobs", `{"kind":"nope"}`, as("ana")...)
	e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", id), "", as("bo")...)
	e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", id), "", as("bo")...)
	e.do(t, "POST", "/api/jobs/retry", fmt.Sprintf(`{"ids":[%d,99999999]}`, id), as("bo")...)
	e.do(t, "POST", "/api/jobs/cancel", `{"filter":{"kinds":["report"]}}`, as("bo")...)
	e.do(t, "POST", "/api/jobs/retry", `{"filter":{"queue":"a\u0000"}}`, as("bo")...)
	e.do(t, "POST", "/api/queues/q1/pause", "", as("cy")...)
	e.do(t, "POST", "/api/queues/q1/resume", "", as("")...)
	e.do(t, "POST", "/api/jobs/cancel", `{"ids":`, as("cy")...)
	e.expectError(t, http.StatusForbidden, "forbidden", "POST", "/api/queues/q1/pause", "", as("reader")...)

	type row struct {
		Actor, Action, Target, Result string
		Changed                       int64
	}
	var got []row
	entries := e.audit(t, 4)
	for i, a := range entries {
		if i > 0 {
			require.Less(t, a.ID, entries[i-1].ID, "newest first")
		}
		require.False(t, a.At.IsZero())
		actor := a.Actor
		if a.Action == "resume" {
			require.Equal(t, "127.0.0.1", actor, "without an actor, the remote address, without its port")
			actor = "(remote)"
		}
		got = append(got, row{actor, a.Action, compact(t, a.Target), a.Result, a.Changed})
	}
	want := []row{
		{"cy", "cancel", "null", "bad_request", 0},
		{"(remote)", "resume", `{"queue":"q1"}`, "ok", 0},
		{"cy", "pause", `{"queue":"q1"}`, "ok", 0},
		{"bo", "retry", "null", "invalid_option", 0}, // the target held a NUL the log cannot keep
		{"bo", "cancel", `{"filter":{"kinds":["report"]}}`, "ok", 1},
		{"bo", "retry", fmt.Sprintf(`{"ids":[%d,99999999]}`, id), "ok", 1},
		{"bo", "cancel", fmt.Sprintf(`{"job":%d}`, id), "wrong_status", 0},
		{"bo", "cancel", fmt.Sprintf(`{"job":%d}`, id), "ok", 1},
		{"ana", "submit", `{"kind":"nope"}`, "unknown_kind", 0},
		{"ana", "submit", fmt.Sprintf(`{"duplicate":true,"job":%d,"kind":"report"}`, id), "ok", 0},
		{"ana", "submit", fmt.Sprintf(`{"job":%d,"kind":"report"}`, id), "ok", 1},
	}
	require.Equal(t, want, got)
	e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/audit?cursor=e30", "")
}

// compact returns JSON without spaces, with its objects' keys in order
// (PostgreSQL's jsonb orders them its own way).
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestAuditFailureKeepsTheChange: when the audit log does not take an
// entry, the change it describes is still answered as done, and the
// failure is logged.
func TestAuditFailureKeepsTheChange(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	e := newEnv(t, console.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))),
		console.WithAuthorizer(func(r *http.Request) (console.Access, error) {
			acc, _ := allowAll(r)
			acc.Actor = "bad\x00actor" // no database stores a NUL in text
			return acc, nil
		}))
	res := e.do(t, "POST", "/api/jobs", `{"kind":"report"}`)
	require.Equal(t, http.StatusCreated, res.status, "body: %s", res.body)
	require.Contains(t, logged.String(), "the audit log did not take a change")
	require.Contains(t, logged.String(), "action=submit")
	require.Empty(t, e.audit(t, 10))
}
