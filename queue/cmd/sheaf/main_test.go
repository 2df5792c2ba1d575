package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// binary is the sheaf command the tests run: this test binary, which is
// the command when asSheaf is set (see TestMain). Running the command's own
// code in a process of its own, with its arguments, output and exit code,
// spares the tests a build of the command and a second link.
var binary string

// asSheaf, set in a process's environment, makes the test binary the
// sheaf command.
const asSheaf = "SHEAF_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asSheaf) != "" {
		testexit.Exit(sheafMain())
	}
	var err error
	if binary, err = os.Executable(); err != nil {
		panic(err)
	}
	if err := os.Setenv(asSheaf, "1"); err != nil { // for the processes the tests start
		panic(err)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	testexit.Exit(code)
}

// result is a run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// sheaf runs the binary with args and the environment env (KEY=value),
// without $SHEAF_DATABASE_URL unless env sets it.
func sheaf(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(filteredEnv(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run sheaf %q: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

func filteredEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, dbEnv+"=") && !strings.HasPrefix(kv, consoleToken+"=") {
			out = append(out, kv)
		}
	}
	return out
}

type report struct{ County string }

func (report) Kind() string { return "county_report" }

// fixture is a migrated SQLite queue with a client that knows the kind
// report, and the URL the binary takes for it.
type fixture struct {
	url    string
	client *queue.Client
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.db")
	db, err := sqlitedb.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		sqlDB.Close()
	})
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
	c, err := queue.NewClient(db, reg)
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return fixture{url: "sqlite:" + path, client: c}
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-h"}, {"help"}, {"migrate", "-h"}, {"migrate", "sql", "-h"}, {"migrate", "status", "--help"},
		{"jobs", "-h"}, {"jobs", "list", "-h"}, {"jobs", "get", "-h"}, {"jobs", "retry", "-h"}, {"jobs", "cancel", "-h"},
		{"queues", "-h"}, {"queues", "pause", "-h"}, {"queues", "resume", "-h"},
		{"review", "-h"}, {"serve", "-h"}, {"bench", "-h"},
	} {
		r := sheaf(t, nil, args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		require.Contains(t, r.stdout, "Usage: sheaf", args)
		require.Empty(t, r.stderr, args)
	}
}

func TestUsageErrorsExitWith2(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"jobs", "list"}, "no database: give -db URL or set $SHEAF_DATABASE_URL"},
		{[]string{"jobs", "list", "-db", "oracle://x"}, `want postgres://…, mysql://… or sqlite:path`},
		{[]string{"jobs", "list", "-db", "mysql://x"}, "names no server or database"},
		{[]string{"jobs", "list", "-db", "sqlite:"}, "names no file"},
		{[]string{"jobs", "list", "-nope", "-db", f.url}, "flag provided but not defined: -nope"},
		{[]string{"jobs", "list", "-status", "DONE", "-db", f.url}, `-status "DONE"`},
		{[]string{"jobs", "list", "-since", "yesterday", "-db", f.url}, `-since "yesterday"`},
		{[]string{"jobs"}, "want a subcommand"},
		{[]string{"jobs", "get", "x1", "-db", f.url}, `"x1" is not a job ID`},
		{[]string{"jobs", "get", "-db", f.url}, "want one job ID"},
		{[]string{"jobs", "cancel", "-db", f.url}, "want job IDs"},
		{[]string{"jobs", "cancel", "1", "-reason", strings.Repeat("é", 501), "-db", f.url}, "reason too long: 501 characters, at most 500"},
		{[]string{"queues", "pause", "-db", f.url}, "want NAME"},
		{[]string{"queues", "drain", "-db", f.url}, `unknown subcommand "drain"`},
		{[]string{"migrate", "down", "-db", f.url}, `unknown subcommand "down"`},
		{[]string{"review", "-db", f.url}, "give one of -run, -period or -from"},
		{[]string{"review", "-run", "a", "-period", "2025-12-08", "-db", f.url}, "give one of"},
		{[]string{"bench", "-jobs", "0", "-db", f.url}, "-jobs 0"},
		{[]string{"jobs", "list", "-limit", "20000", "-db", f.url}, "invalid option"},
		{[]string{"queues", "pause", strings.Repeat("q", 300), "-db", f.url}, "invalid option"},
	} {
		r := sheaf(t, nil, c.args...)
		require.Equal(t, 2, r.code, "%q: %s", c.args, r.stderr)
		require.Contains(t, r.stderr+r.stdout, c.want, c.args)
	}
	// The URL may come from the environment.
	r := sheaf(t, []string{dbEnv + "=" + f.url}, "jobs", "list")
	require.Equal(t, 0, r.code, r.stderr)
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "new.db")
	r := sheaf(t, nil, "migrate", "status", "-db", url)
	require.Equal(t, 1, r.code, "status does not create a file")
	require.Contains(t, r.stderr, "no such file")
	require.NoFileExists(t, filepath.Join(dir, "new.db"))

	r = sheaf(t, nil, "migrate", "-db", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("migrated from schema version 0 to %d\n", queue.SchemaVersion), r.stdout)
	r = sheaf(t, nil, "migrate", "up", "-db", url)
	require.Equal(t, fmt.Sprintf("schema version %d: up to date\n", queue.SchemaVersion), r.stdout)
	r = sheaf(t, nil, "migrate", "status", "-db", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema version %d; this sheaf migrates to %d\n", queue.SchemaVersion, queue.SchemaVersion), r.stdout)

	r = sheaf(t, nil, "migrate", "sql", "-db", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "-- sheaf schema version 1\n")
	require.Contains(t, r.stdout, fmt.Sprintf("-- sheaf schema version %d\n", queue.SchemaVersion))
	r = sheaf(t, nil, "migrate", "sql", "-from", fmt.Sprint(queue.SchemaVersion-1), "-db", url)
	require.Equal(t, 1, strings.Count(r.stdout, "-- sheaf schema version"))

	// An existing file that was never migrated: the schema's exit code.
	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	r = sheaf(t, nil, "migrate", "status", "-db", "sqlite:"+empty)
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema version 0;")
	r = sheaf(t, nil, "jobs", "list", "-db", "sqlite:"+empty)
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, "not migrated")
}

func TestJobsAndQueues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, county := range []string{"Travis", "Harris", "Bexar"} {
		_, err := f.client.Enqueue(ctx, report{County: county}, queue.AuthContext(queue.Auth{"ssn": "123-45-6789"}), queue.CorrelationID("req-"+county))
		require.NoError(t, err)
	}
	r := sheaf(t, nil, "jobs", "list", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	require.True(t, strings.HasPrefix(lines[1], "3 "), "newest first: %s", r.stdout)

	r = sheaf(t, nil, "jobs", "cancel", "2", "-reason", " Harris county asked to hold it ", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "job 2: CANCELLED\n", r.stdout)
	entries, err := f.client.AuditLog(ctx, 0, 1)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "cancel", entries[0].Action)
	require.JSONEq(t, `{"job":2,"reason":"Harris county asked to hold it"}`, string(entries[0].Target))
	r = sheaf(t, nil, "jobs", "cancel", "-db", f.url, "2", "999")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "job 2: queue: job is not in a status that allows this")
	require.Contains(t, r.stderr, "job 999: queue: job not found")
	require.Contains(t, r.stderr, "2 of 2 jobs could not be cancelled")

	r = sheaf(t, nil, "jobs", "list", "-status", "cancelled", "-json", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, float64(2), v["id"])
	require.Equal(t, "req-Harris", v["correlation_id"])
	r = sheaf(t, nil, "jobs", "list", "-q", "bexar", "-kind", "county_report", "-json", "-db", f.url)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)

	r = sheaf(t, nil, "jobs", "retry", "2", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "job 2: QUEUED\n", r.stdout)

	r = sheaf(t, nil, "jobs", "get", "2", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `{"County":"Harris"}`)
	r = sheaf(t, nil, "jobs", "get", "2", "-json", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"kind":"county_report"`)
	require.NotContains(t, r.stdout, "123-45-6789", "claims are never shown")
	r = sheaf(t, nil, "jobs", "get", "999", "-db", f.url)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "job not found")

	r = sheaf(t, nil, "queues", "pause", "default", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	r = sheaf(t, nil, "queues", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `default\s+yes\s+\S+\s+QUEUED 3`, r.stdout)
	r = sheaf(t, nil, "queues", "resume", "default", "-db", f.url)
	require.Equal(t, "queue default: resumed\n", r.stdout)
	r = sheaf(t, nil, "queues", "list", "-json", "-db", f.url)
	require.Contains(t, r.stdout, `"Paused":false`)

	log, err := f.client.AuditLog(ctx, 0, 10)
	require.NoError(t, err)
	var actions []string
	for _, e := range log {
		require.True(t, strings.HasPrefix(e.Actor, "sheaf-cli:"), e.Actor)
		actions = append(actions, e.Action+":"+e.Result)
	}
	require.Equal(t, []string{"resume:ok", "pause:ok", "retry:ok", "cancel:queue: job not found: 999", "cancel:queue: job is not in a status that allows this: cannot cancel job 2, it is CANCELLED", "cancel:ok"}, actions)
}

func TestReview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, report{County: "Travis"}, queue.AuthContext(queue.Auth{"ssn": "123-45-6789"}))
	require.NoError(t, err)
	r := sheaf(t, nil, "review", "-from", "1h", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 jobs: QUEUED 1")
	require.Contains(t, r.stdout, "Never ran (1):")
	r = sheaf(t, nil, "review", "-from", "1h", "-json", "-db", f.url)
	require.Equal(t, 0, r.code, r.stderr)
	var v struct {
		Total    int64
		NeverRan []map[string]any `json:"never_ran"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, int64(1), v.Total)
	require.Equal(t, "county_report", v.NeverRan[0]["kind"])
	require.NotContains(t, r.stdout, "123-45-6789")
}

func TestServeReadOnlyUnlessTokened(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, token := range []string{"", "s3cret"} {
		var env []string
		if token != "" {
			env = []string{consoleToken + "=" + token}
		}
		cmd := exec.Command(binary, "serve", "-addr", "127.0.0.1:0", "-db", f.url)
		cmd.Env = append(filteredEnv(), env...)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		base := strings.Fields(strings.TrimPrefix(line, "sheaf console on "))[0]
		base = strings.TrimSuffix(base, ",")

		resp, err := http.Get(base + "api/health")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		pause := func(auth string) int {
			req, _ := http.NewRequest(http.MethodPost, base+"api/queues/default/pause", nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		require.Equal(t, http.StatusForbidden, pause(""))
		require.Equal(t, http.StatusForbidden, pause("wrong"))
		if token != "" {
			require.Equal(t, http.StatusOK, pause(token))
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		require.NoError(t, cmd.Wait(), "serve exits 0 when interrupted")
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestBench(t *testing.T) {
	t.Parallel()
	url := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	r := sheaf(t, nil, "bench", "-jobs", "300", "-workers", "10", "-db", url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `inserted 300 jobs in \S+: \d+ jobs/s\nworked 300 jobs with 10 workers in \S+: \d+ jobs/s\n`, r.stdout)
}

// TestOnPostgreSQL runs the commands against a schema of the test server.
func TestOnPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	r := sheaf(t, nil, "migrate", "-db", db.DSN)
	require.Equal(t, 0, r.code, r.stderr)
	r = sheaf(t, nil, "bench", "-jobs", "200", "-workers", "10", "-db", db.DSN)
	require.Equal(t, 0, r.code, r.stderr)
	r = sheaf(t, nil, "jobs", "list", "-queue", benchQueue, "-status", "COMPLETED", "-limit", "500", "-json", "-db", db.DSN)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 200, strings.Count(r.stdout, "\n"))
	r = sheaf(t, nil, "migrate", "status", "-db", db.DSN)
	require.Equal(t, 0, r.code, r.stderr)
	r = sheaf(t, nil, "jobs", "list", "-db", strings.Replace(db.DSN, "postgres@", "nobody@", 1))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "connect to")
}
