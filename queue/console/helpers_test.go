package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

func TestMain(m *testing.M) {
	if err := pgtest.Reachable(); err != nil && os.Getenv("CI") == "" && pgtest.Store() == "postgres" {
		// The tests skip themselves, saying why; the examples cannot.
		_ = flag.Set("test.run", "^(Test|Fuzz)")
	}
	goleak.VerifyTestMain(testexit.M(browsertest.Main(dropAfter{m})), testexit.Option())
}

// dropAfter runs the tests and benchmarks, then drops the table the
// benchmarks share, before goleak looks for goroutines left running.
type dropAfter struct{ m *testing.M }

func (d dropAfter) Run() int {
	code := d.m.Run()
	if err := dropBenchTable(); err != nil {
		fmt.Fprintln(os.Stderr, "console benchmarks: drop their table:", err)
		return max(code, 1)
	}
	return code
}

// report is the tests' job kind: a county report that fails for good when
// asked to.
type report struct {
	County string `json:"county"`
	Fail   bool   `json:"fail,omitempty"`
}

func (report) Kind() string { return "report" }

func registerReport(r *queue.Registry) error {
	return queue.Register(r, queue.HandlerFunc[report](func(_ context.Context, j *queue.Job[report]) error {
		if j.Args.Fail {
			return queue.Permanent(fmt.Errorf("county %s: upstream returned 503 for request 0x%x", j.Args.County, j.ID*4099))
		}
		return nil
	}))
}

// env is a test's database, client and console server.
type env struct {
	db     *pgtest.DB
	reg    *queue.Registry
	client *queue.Client
	srv    *httptest.Server
	h      http.Handler
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// allowAll lets every caller do everything, as "tester".
func allowAll(*http.Request) (console.Access, error) {
	return console.Access{Read: true, Submit: true, Cancel: true, Retry: true, Pause: true, Actor: "tester"}, nil
}

// newEnv serves a console with opts (quiet, and reading the counts afresh
// for every request, unless they say otherwise) on a fresh database.
func newEnv(t *testing.T, opts ...console.Option) *env {
	t.Helper()
	db, reg, c := newClient(t)
	h, err := console.New(c, append([]console.Option{console.WithLogger(quiet()), console.WithCountsCache(0)}, opts...)...)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{db: db, reg: reg, client: c, srv: srv, h: h}
}

// newClient returns a migrated client, with the report kind, on a fresh
// database.
func newClient(t testing.TB) (*pgtest.DB, *queue.Registry, *queue.Client) {
	t.Helper()
	db := queuetest.NewDB(t)
	reg := queue.NewRegistry()
	require.NoError(t, registerReport(reg))
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return db, reg, c
}

// response is what a request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// decode decodes the body into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// errCode returns the error code of an error response.
func (r response) errCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message, Param string }
	}
	r.decode(t, &e)
	require.NotEmpty(t, e.Error.Code, "not an error: %s", r.body)
	return e.Error.Code
}

// do sends a request; headers are name, value pairs.
func (e *env) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// expectError sends a request and checks its status and error code.
func (e *env) expectError(t *testing.T, status int, code, method, path, body string, headers ...string) response {
	t.Helper()
	res := e.do(t, method, path, body, headers...)
	require.Equal(t, status, res.status, "body: %s", res.body)
	require.Equal(t, code, res.errCode(t))
	return res
}

// enqueue submits a report job through the client.
func (e *env) enqueue(t *testing.T, args report, opts ...queue.EnqueueOption) int64 {
	t.Helper()
	res, err := e.client.Enqueue(context.Background(), args, opts...)
	require.NoError(t, err)
	return res.Job.ID
}

// work runs a runner until the jobs ids are no longer queued or running.
func (e *env) work(t *testing.T, ids ...int64) {
	t.Helper()
	r, err := queue.NewRunner(e.client, queue.WithPollInterval(20*time.Millisecond), queue.WithWorkers(4))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, r.Start(ctx))
	defer func() {
		stop, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, r.Stop(stop))
	}()
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = e.client.Wait(wait, ids...)
	require.NoError(t, err)
}

// jobOf decodes a {"job":…} response.
func jobOf(t *testing.T, r response) map[string]any {
	t.Helper()
	job, ok := r.json(t)["job"].(map[string]any)
	require.True(t, ok, "no job in %s", r.body)
	return job
}

// idOf returns the ID of a job in a decoded response.
func idOf(job map[string]any) int64 { return int64(job["id"].(float64)) }

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.NewEncoder(&b).Encode(v))
	return b.String()
}
