package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

func TestSubmitAndGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll),
		console.WithSubmitter(func(r *http.Request) (queue.Auth, error) {
			return queue.Auth{"user": r.Header.Get("X-User"), "role": "ops"}, nil
		}))
	runAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	res := e.do(t, "POST", "/api/jobs", jsonBody(t, map[string]any{
		"kind": "report", "args": map[string]any{"county": "Travis"}, "queue": "nightly", "priority": 8,
		"run_at": runAt, "max_attempts": 7, "correlation_id": "req-1",
	}), "X-User", "ana")
	require.Equal(t, http.StatusCreated, res.status, "body: %s", res.body)
	job := jobOf(t, res)
	require.Equal(t, false, res.json(t)["duplicate"])
	require.Equal(t, "report", job["kind"])
	require.Equal(t, "nightly", job["queue"])
	require.Equal(t, float64(8), job["priority"])
	require.Equal(t, float64(7), job["max_attempts"])
	require.Equal(t, "req-1", job["correlation_id"])
	require.Equal(t, "QUEUED", job["status"])
	require.Equal(t, map[string]any{"county": "Travis"}, job["args"])
	got, err := time.Parse(time.RFC3339Nano, job["run_at"].(string))
	require.NoError(t, err)
	require.True(t, got.Equal(runAt))
	require.NotContains(t, string(res.body), "auth", "a job's auth context is never shown")

	id := idOf(job)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.Auth{"user": "ana", "role": "ops"}, rec.Auth, "the submitter's claims are the job's auth")

	res = e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", id), "")
	require.Equal(t, http.StatusOK, res.status)
	job = jobOf(t, res)
	require.Equal(t, float64(id), job["id"])
	require.Equal(t, map[string]any{"processed": float64(0), "total": nil}, job["progress"])
	require.Equal(t, []any{}, job["parent_ids"])
	require.Nil(t, job["started_at"])
	require.NotContains(t, string(res.body), "ana")

	e.expectError(t, http.StatusNotFound, "not_found", "GET", "/api/jobs/99999999", "")
	e.expectError(t, http.StatusBadRequest, "bad_request", "GET", "/api/jobs/abc", "")
	e.expectError(t, http.StatusBadRequest, "bad_request", "GET", "/api/jobs/0", "")
}

func TestSubmitRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	for _, c := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"unknown kind", `{"kind":"nope"}`, 422, "unknown_kind"},
		{"args of the wrong type", `{"kind":"report","args":{"county":5}}`, 422, "invalid_payload"},
		{"args with a NUL", `{"kind":"report","args":{"county":"a\u0000b"}}`, 422, "invalid_payload"},
		{"bad priority", `{"kind":"report","priority":99}`, 400, "invalid_option"},
		{"bad max attempts", `{"kind":"report","max_attempts":0}`, 400, "invalid_option"},
		{"bad queue", `{"kind":"report","queue":"` + strings.Repeat("q", 200) + `"}`, 400, "invalid_option"},
		{"no kind", `{"args":{}}`, 400, "bad_request"},
		{"unknown field", `{"kind":"report","prio":3}`, 400, "unknown_field"},
		{"not JSON", `{"kind":`, 400, "bad_request"},
		{"two values", `{"kind":"report"} {}`, 400, "bad_request"},
		{"wrong type", `{"kind":7}`, 400, "bad_request"},
		{"bad time", `{"kind":"report","run_at":"tomorrow"}`, 400, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.expectError(t, c.status, c.code, "POST", "/api/jobs", c.body)
		})
	}
	e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs", "")
	e.expectError(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "POST", "/api/jobs", `{"kind":"report"}`,
		"Content-Type", "application/x-www-form-urlencoded")
	big := `{"kind":"report","args":{"county":"` + strings.Repeat("x", 1<<20) + `"}}`
	e.expectError(t, http.StatusRequestEntityTooLarge, "body_too_large", "POST", "/api/jobs", big)
	e.expectError(t, http.StatusBadRequest, "bad_request", "POST", "/api/jobs", `{"kind":"report","idempotency_key":"a"}`,
		"Idempotency-Key", "b")
	jobs, err := e.client.List(context.Background(), queue.Filter{})
	require.NoError(t, err)
	require.Empty(t, jobs, "nothing refused was stored")
}

func TestSubmitterError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll), console.WithSubmitter(func(*http.Request) (queue.Auth, error) {
		return nil, fmt.Errorf("no session")
	}))
	e.expectError(t, http.StatusUnauthorized, "unauthorized", "POST", "/api/jobs", `{"kind":"report"}`)
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	body := `{"kind":"report","args":{"county":"Harris"}}`
	first := e.do(t, "POST", "/api/jobs", body, "Idempotency-Key", "harris-2025-12-08")
	require.Equal(t, http.StatusCreated, first.status, "body: %s", first.body)
	second := e.do(t, "POST", "/api/jobs", body, "Idempotency-Key", "harris-2025-12-08")
	require.Equal(t, http.StatusOK, second.status, "body: %s", second.body)
	require.Equal(t, true, second.json(t)["duplicate"])
	require.Equal(t, idOf(jobOf(t, first)), idOf(jobOf(t, second)))
	require.Equal(t, "harris-2025-12-08", jobOf(t, second)["idempotency_key"])

	third := e.do(t, "POST", "/api/jobs", `{"kind":"report","idempotency_key":"harris-2025-12-08"}`)
	require.Equal(t, http.StatusOK, third.status, "the field works as the header does")
	require.Equal(t, idOf(jobOf(t, first)), idOf(jobOf(t, third)))
}

func TestCorrelationFromHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	corr := func(res response) any { return jobOf(t, res)["correlation_id"] }

	res := e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01",
		"X-Correlation-ID", "ignored")
	require.Equal(t, trace, corr(res), "the traceparent's trace ID wins over X-Correlation-ID")
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "X-Correlation-ID", "req-42")
	require.Equal(t, "req-42", corr(res))
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report","correlation_id":"mine"}`, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	require.Equal(t, "mine", corr(res), "a correlation ID in the body wins")
	for _, bad := range []string{
		"00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01", // all-zero trace ID
		"00-" + strings.ToUpper(trace) + "-00f067aa0ba902b7-01",  // upper case
		"ff-" + trace + "-00f067aa0ba902b7-01",                   // forbidden version
		"00-" + trace + "-0000000000000000-01",                   // all-zero parent
		"00-" + trace + "-00f067aa0ba902b7-01-extra",             // version 00 has four parts
		"garbage",
	} {
		res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "traceparent", bad, "X-Correlation-ID", "fallback")
		require.Equal(t, "fallback", corr(res), bad)
	}
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "traceparent", "01-"+trace+"-00f067aa0ba902b7-01-future")
	require.Equal(t, trace, corr(res), "a later version may carry more parts")
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`)
	require.Nil(t, corr(res))
}

func TestArgsFormatter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll), console.WithArgsFormatter(func(kind string, args json.RawMessage) json.RawMessage {
		return json.RawMessage(`{"redacted":"` + kind + `"}`)
	}))
	res := e.do(t, "POST", "/api/jobs", `{"kind":"report","args":{"county":"Secret"}}`)
	require.Equal(t, http.StatusCreated, res.status)
	id := idOf(jobOf(t, res))
	want := map[string]any{"redacted": "report"}
	require.Equal(t, want, jobOf(t, res)["args"])
	require.Equal(t, want, jobOf(t, e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", id), ""))["args"])
	list := e.do(t, "GET", "/api/jobs", "")
	require.NotContains(t, string(list.body), "Secret")
	require.NotContains(t, string(e.do(t, "POST", fmt.Sprintf("/api/jobs/%d/cancel", id), "").body), "Secret")
}

// listIDs lists jobs with the query and returns their IDs and the next
// cursor.
func (e *env) listIDs(t *testing.T, query string) ([]int64, string) {
	t.Helper()
	res := e.do(t, "GET", "/api/jobs?"+query, "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var out struct {
		Jobs []struct {
			ID int64 `json:"id"`
		} `json:"jobs"`
		NextCursor string `json:"next_cursor"`
	}
	res.decode(t, &out)
	ids := []int64{}
	for _, j := range out.Jobs {
		ids = append(ids, j.ID)
	}
	return ids, out.NextCursor
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.enqueue(t, report{County: "A"}, queue.InRun("nightly@1"), queue.InPeriod("2025-12-08"), queue.CorrelationID("c1"))
	b := e.enqueue(t, report{County: "B"}, queue.OnQueue("other"))
	mid := e.db.Now(t)
	time.Sleep(10 * time.Millisecond)
	c := e.enqueue(t, report{County: "C"})
	_, err := e.client.Cancel(ctx, c)
	require.NoError(t, err)

	ids, next := e.listIDs(t, "")
	require.Equal(t, []int64{c, b, a}, ids, "newest first")
	require.Empty(t, next)
	for q, want := range map[string][]int64{
		"status=CANCELLED":                    {c},
		"status=queued,cancelled":             {c, b, a},
		"status=QUEUED&status=FAILED":         {b, a},
		"kind=report":                         {c, b, a},
		"kind=other":                          {},
		"queue=other":                         {b},
		"run=" + url.QueryEscape("nightly@1"): {a},
		"period=2025-12-08":                   {a},
		"correlation=c1":                      {a},
		"since=" + url.QueryEscape(mid.Format(time.RFC3339Nano)): {c},
		"until=" + url.QueryEscape(mid.Format(time.RFC3339Nano)): {b, a},
	} {
		ids, _ := e.listIDs(t, q)
		require.Equal(t, want, ids, q)
	}

	// Pages: two, then one, then the cursor is gone.
	ids, next = e.listIDs(t, "limit=2")
	require.Equal(t, []int64{c, b}, ids)
	require.NotEmpty(t, next)
	ids, next2 := e.listIDs(t, "limit=2&cursor="+next)
	require.Equal(t, []int64{a}, ids)
	require.Empty(t, next2)
	ids, _ = e.listIDs(t, "limit=1&status=CANCELLED&cursor="+next)
	require.Empty(t, ids, "a cursor combines with filters")

	for q, param := range map[string]string{
		"status=DONE":                     "status",
		"since=yesterday":                 "since",
		"until=2025-13-01":                "until",
		"limit=0":                         "limit",
		"limit=501":                       "limit",
		"limit=x":                         "limit",
		"cursor=%%%":                      "query",
		"cursor=bm90IGpzb24":              "cursor",
		"cursor=eyJhIjozfQ":               "cursor", // {"a":3}: a cursor of the old ascending listing
		"queue=a&queue=b":                 "queue",
		"colour=blue":                     "colour",
		"queue=%00":                       "queue",
		"queue=%ff":                       "queue",
		"run=" + strings.Repeat("r", 600): "run",
	} {
		res := e.expectError(t, http.StatusBadRequest, "invalid_param", "GET", "/api/jobs?"+q, "")
		var body struct{ Error struct{ Param string } }
		res.decode(t, &body)
		require.Equal(t, param, body.Error.Param, q)
	}
}

// TestListJobsNewestFirstAcrossPages pages through more jobs than fit on a
// page while new ones arrive: every job there was at the start is listed
// once, newest first, and none that came later.
func TestListJobsNewestFirstAcrossPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var want []int64
	for i := range 23 {
		want = append(want, e.enqueue(t, report{County: fmt.Sprint(i)}))
	}
	slices.Reverse(want)
	var got []int64
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the pages never end")
		ids, next := e.listIDs(t, "limit=5&cursor="+cursor)
		got = append(got, ids...)
		if next == "" {
			break
		}
		cursor = next
		_, err := e.client.Enqueue(ctx, report{County: "later"}) // newer than the listing's first page
		require.NoError(t, err)
	}
	require.Equal(t, want, got)
}

// TestListJobsSearch finds jobs by a word of their last error, or a value
// of their arguments, and nothing else.
func TestListJobsSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	travis := e.enqueue(t, report{County: "Travis"})
	harris := e.enqueue(t, report{County: "Harris", Fail: true})
	elPaso := e.enqueue(t, report{County: "El Paso", Fail: true})
	other := e.enqueue(t, report{County: "Bexar"})
	e.work(t, travis, harris, elPaso, other)
	for q, want := range map[string][]int64{
		"Travis":           {travis},
		"travis":           {travis},
		"upstream":         {elPaso, harris}, // the error text
		"County+El+Paso:":  {elPaso},         // the error text, which names the county
		"%22county%22":     {other, elPaso, harris, travis},
		"no-such-thing":    {},
		"100%25":           {}, // % is not a wildcard
		"returned+503":     {elPaso, harris},
		"Harris&kind=none": {},
	} {
		ids, _ := e.listIDs(t, "q="+q)
		require.Equal(t, want, ids, q)
	}
}

// TestSearchWindow: a page of a search examines a window of jobs below its
// cursor; a page that found fewer than its limit there still leads on to
// the older jobs, until the oldest.
func TestSearchWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	console.SetSearchWindow(e.h, 10)
	var ids []int64
	for i := range 25 {
		county := "Bexar"
		if i == 2 || i == 19 || i == 21 {
			county = "Travis"
		}
		ids = append(ids, e.enqueue(t, report{County: county}))
	}
	// The pages' windows: ids[15:25] (a full page: the next starts below
	// its job), ids[11:21], ids[1:11], ids[0:1].
	var pages [][]int64
	cursor := ""
	for {
		require.Less(t, len(pages), 10, "the pages never end")
		got, next := e.listIDs(t, "q=travis&limit=1&cursor="+cursor)
		pages = append(pages, got)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, [][]int64{{ids[21]}, {ids[19]}, {ids[2]}, {}}, pages)
}

// TestCountsCache: the counts are reused within the cache's time, saying
// when they were read, but for the console's own pauses.
func TestCountsCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll), console.WithCountsCache(time.Hour))
	type stats struct {
		ByStatus map[string]int64 `json:"by_status"`
		AsOf     time.Time        `json:"as_of"`
	}
	type queues struct {
		Queues []struct {
			Name   string           `json:"name"`
			Counts map[string]int64 `json:"counts"`
			Paused bool             `json:"paused"`
		} `json:"queues"`
		AsOf time.Time `json:"as_of"`
	}
	read := func(path string, v any) {
		res := e.do(t, "GET", path, "")
		require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
		res.decode(t, v)
	}
	e.enqueue(t, report{County: "A"})
	var s1, s2 stats
	var q1, q2, q3 queues
	read("/api/stats", &s1)
	read("/api/queues", &q1)
	e.enqueue(t, report{County: "B"})
	read("/api/stats", &s2)
	read("/api/queues", &q2)
	require.Equal(t, map[string]int64{"QUEUED": 1}, s2.ByStatus, "reused")
	require.Equal(t, s1.AsOf, s2.AsOf)
	require.False(t, s2.AsOf.IsZero())
	require.Equal(t, q1, q2)

	res := e.do(t, "POST", "/api/queues/default/pause", "")
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	read("/api/queues", &q3)
	require.Len(t, q3.Queues, 1)
	require.True(t, q3.Queues[0].Paused, "the console's own pause is shown at once")
	require.Equal(t, int64(2), q3.Queues[0].Counts["QUEUED"])
	require.True(t, q3.AsOf.After(q2.AsOf))
}

// countyExport is a chunked kind of five records, two to a chunk.
type countyExport struct{}

func (countyExport) Kind() string { return "county_export" }

type fiveRecords struct{}

func (fiveRecords) Records(context.Context, *queue.Job[countyExport]) (int64, iter.Seq2[int, error], error) {
	return 5, func(yield func(int, error) bool) {
		for i := range 5 {
			if !yield(i, nil) {
				return
			}
		}
	}, nil
}

func (fiveRecords) ProcessChunk(context.Context, *queue.Job[countyExport], batch.Batch[int]) error {
	return nil
}

func (fiveRecords) Cleanup(context.Context, *queue.Job[countyExport]) error { return nil }

// A chunked job says its chunk size, how many chunks it has and has done,
// and how long a chunk took on average; other jobs say nothing of chunks.
func TestChunkedJobSaysItsChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, queue.RegisterChunked[countyExport, int](e.reg, fiveRecords{}, queue.ChunkSize(2)))
	res, err := e.client.Enqueue(context.Background(), countyExport{})
	require.NoError(t, err)
	id := res.Job.ID
	plain := e.enqueue(t, report{County: "Travis"})

	// Before it runs, it knows its chunk size, and nothing else yet.
	var got struct {
		Job struct {
			Progress struct {
				Processed    int64    `json:"processed"`
				ChunkSize    int      `json:"chunk_size"`
				Chunks       *int64   `json:"chunks"`
				ChunksDone   int64    `json:"chunks_done"`
				ChunkSeconds *float64 `json:"chunk_seconds"`
				ChunkTimes   *struct {
					Count       int64     `json:"count"`
					Min         float64   `json:"min_seconds"`
					Max         float64   `json:"max_seconds"`
					Mean        float64   `json:"mean_seconds"`
					Recent      []float64 `json:"recent_seconds"`
					FirstRecent int64     `json:"first_recent"`
				} `json:"chunk_times"`
			} `json:"progress"`
		} `json:"job"`
	}
	e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", id), "").decode(t, &got)
	p := got.Job.Progress
	require.Equal(t, 2, p.ChunkSize)
	require.Nil(t, p.Chunks, "the total is known once the attempt starts")
	require.Nil(t, p.ChunkSeconds)
	require.Nil(t, p.ChunkTimes, "no chunk has run")

	e.work(t, id, plain)
	e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", id), "").decode(t, &got)
	p = got.Job.Progress
	require.EqualValues(t, 5, p.Processed)
	require.Equal(t, 2, p.ChunkSize)
	require.NotNil(t, p.Chunks)
	require.EqualValues(t, 3, *p.Chunks, "2, 2 and 1 records")
	require.EqualValues(t, 3, p.ChunksDone)
	require.NotNil(t, p.ChunkSeconds)
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.InDelta(t, rec.CompletedAt.Sub(*rec.StartedAt).Seconds()/3, *p.ChunkSeconds, 1e-6, "the attempt's time over its chunks")
	// Each chunk's own time, as the runner saved it with the progress.
	ct := p.ChunkTimes
	require.NotNil(t, ct)
	require.EqualValues(t, 3, ct.Count)
	require.EqualValues(t, 1, ct.FirstRecent)
	require.Len(t, ct.Recent, 3)
	require.Equal(t, slices.Max(ct.Recent), ct.Max)
	require.Equal(t, slices.Min(ct.Recent), ct.Min)
	require.InDelta(t, (ct.Recent[0]+ct.Recent[1]+ct.Recent[2])/3, ct.Mean, 1e-6)

	page := e.page(t, fmt.Sprintf("/jobs/%d", id), http.StatusOK)
	require.Regexp(t, `<p class="note" id="chunks">In chunks of 2 records: 3 of 3 done, [^<]+ a chunk on average\.</p>`, page)
	require.Regexp(t, `<p id="chunk-times">Latest [^,]+, slowest [^,]+, fastest [^,]+, [^<]+ on average over 3 chunks \(the latest attempt's\)\.</p>`, page)
	require.Regexp(t, `<svg class="spark" id="chunk-spark" [^>]*aria-label="Times of chunks 1 to 3, oldest on the left: the slowest, chunk [123], took [^"]+">`, page)
	require.Equal(t, 3, strings.Count(page, `<rect class="bar`))
	require.Equal(t, 1, strings.Count(page, `<rect class="bar slowest"`))
	require.Regexp(t, `(?s)<tbody><tr[^>]*><td>3</td>.*<td>2</td>.*<td>1</td>.*</tbody>`, page, "newest first")
	require.NotContains(t, string(e.do(t, "GET", "/api/jobs?kind=county_export", "").body), "chunk_times", "not in lists")
	require.NotContains(t, e.page(t, fmt.Sprintf("/jobs/%d", plain), http.StatusOK), `id="chunks"`)
	require.NotContains(t, string(e.do(t, "GET", fmt.Sprintf("/api/jobs/%d", plain), "").body), "chunk_size")

	// A console that does not know the kind (sheaf serve) shows the chunk
	// times, not the chunk size, which only the kind's registration says.
	bare, err := queue.NewClient(e.db.Gorm, queue.NewRegistry(), queue.WithLogger(quiet()))
	require.NoError(t, err)
	h, err := console.New(bare, console.WithLogger(quiet()))
	require.NoError(t, err)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/api/jobs/%d", id), nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	got.Job.Progress.ChunkSize, got.Job.Progress.ChunkTimes = 0, nil
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Zero(t, got.Job.Progress.ChunkSize)
	require.NotNil(t, got.Job.Progress.ChunkTimes)
	require.EqualValues(t, 3, got.Job.Progress.ChunkTimes.Count)
}
