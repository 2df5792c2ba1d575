package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// FuzzListFilters sends any query string to GET /api/jobs and GET
// /api/runs: a bad one is the caller's error (4xx), never the server's.
func FuzzListFilters(f *testing.F) {
	for _, q := range []string{
		"", "status=QUEUED", "status=queued,failed&kind=report", "queue=default&run=r@1&period=2025-12-08",
		"since=2025-12-08T00:00:00Z&until=2025-12-09T00:00:00%2B05:30", "limit=500", "limit=-1", "cursor=eyJhIjo1fQ",
		"cursor=eyJhIjotNX0", "cursor=eyJhIjoieCJ9", "correlation=%00", "kind=%ff", "since=0000-01-01T00:00:00%2B23:59",
		"until=9999-12-31T23:59:59-23:59", "limit=1&limit=2", "%zz", "a=b;c=d", "status=", "kind=,,,",
	} {
		f.Add(q)
	}
	_, _, c := newClient(f)
	_, err := c.Enqueue(context.Background(), report{County: "A"}, queue.InRun("r@1"), queue.InPeriod("2025-12-08"))
	require.NoError(f, err)
	h, err := console.New(c, console.WithLogger(quiet()))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range []string{"/api/jobs", "/api/runs"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = path, query
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 || rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
				t.Fatalf("GET %s?%s: %d %s", path, query, rec.Code, rec.Body)
			}
		}
	})
}
