package queue_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// examples gives the runnable examples their schemas (see connect).
var examples pgtest.Examples

func TestMain(m *testing.M) {
	if runChild() { // a child process of the multi-process tests
		testexit.Exit(0)
	}
	if err := pgtest.Reachable(); err != nil && os.Getenv("CI") == "" || pgtest.Store() != "postgres" {
		// The tests skip themselves, saying why; the examples cannot, so
		// they are left out unless -run names them.
		_ = flag.Set("test.run", "^(Test|Fuzz)")
	}
	// Most of these tests wait: for leases to lapse, processes to die,
	// servers to restart. Six at a time keeps two cores busy (four left
	// them half idle); an explicit -parallel still wins, as the command
	// line is parsed after this.
	_ = flag.Set("test.parallel", "6")
	goleak.VerifyTestMain(testexit.M(closingExamples{m}), testexit.Option())
}

// closingExamples runs the tests and examples, then closes what the
// examples opened, before goleak looks for leaks.
type closingExamples struct{ m *testing.M }

func (c closingExamples) Run() int {
	code := c.m.Run()
	if err := examples.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "queue examples:", err)
		code = max(code, 1)
	}
	return code
}

// Payloads used by the tests.
type noop struct{}

func (noop) Kind() string { return "noop" }

type report struct {
	County string `json:"county"`
	Fail   int    `json:"fail,omitempty"` // fail this many attempts first
}

func (report) Kind() string { return "report" }

// env is a test's schema, registry and client.
type env struct {
	db     *pgtest.DB
	reg    *queue.Registry
	client *queue.Client
	events *queuetest.Events
}

func quiet() queue.InstrumentOption { return queue.WithLogger(slog.New(slog.DiscardHandler)) }

// newEnv migrates a fresh schema. register, if given, registers handlers
// before the client is built.
func newEnv(t *testing.T, register func(*queue.Registry)) *env {
	t.Helper()
	db := queuetest.NewDB(t)
	reg := queue.NewRegistry()
	if register != nil {
		register(reg)
	}
	ev := queuetest.NewEvents()
	c, err := queue.NewClient(db.Gorm, reg, quiet(), queue.WithObserver(ev))
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return &env{db: db, reg: reg, client: c, events: ev}
}

// runner starts a runner on the env and stops it when the test ends.
func (e *env) runner(t *testing.T, opts ...queue.RunnerOption) *queue.Runner {
	return queuetest.StartRunner(t, e.client, append([]queue.RunnerOption{queue.WithPollInterval(50 * time.Millisecond)}, opts...)...)
}

// waitStatus waits until job id has status st, looking every 5 ms, and
// fails the test if it has not after a generous deadline.
func (e *env) waitStatus(t *testing.T, id int64, st queue.Status) {
	t.Helper()
	e.waitFor(t, id, string(st), func(s queue.Status) bool { return s == st })
}

// waitFor waits until job id's status is one that ok accepts (want names
// them), looking every 5 ms, and returns it; it fails the test if none
// came before a generous deadline.
func (e *env) waitFor(t *testing.T, id int64, want string, ok func(queue.Status) bool) queue.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st := e.status(t, id)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s; waited for %s", id, st, want)
		}
		<-tick.C
	}
}

// expireLease ends job id's lease a second ago by the database's clock, as
// if its runner had stopped renewing it, for a rescue to find.
func (e *env) expireLease(t *testing.T, id int64) {
	t.Helper()
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET locked_until = ? WHERE id = ?",
		e.db.Time(e.db.Now(t).Add(-time.Second)), id).Error)
}

// expireRunner ends a dead runner's leases a second ago by the database's
// clock: its jobs' and its maintenance leadership's, which would run out in
// their time; for another runner to lead, and rescue its jobs, at once.
func (e *env) expireRunner(t *testing.T, runner string) {
	t.Helper()
	past := e.db.Time(e.db.Now(t).Add(-time.Second))
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET locked_until = ? WHERE locked_by = ? AND status = 'PROCESSING'",
		past, runner).Error)
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_leader SET expires_at = ? WHERE holder = ?", past, runner).Error)
}

func (e *env) status(t *testing.T, id int64) queue.Status {
	t.Helper()
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	return rec.Status
}

// newEnvB is newEnv for benchmarks, with client options.
func newEnvB(b *testing.B, register func(*queue.Registry), opts ...queue.ClientOption) *env {
	b.Helper()
	db := pgtest.NewDB(b)
	reg := queue.NewRegistry()
	register(reg)
	c, err := queue.NewClient(db.Gorm, reg, append([]queue.ClientOption{quiet()}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return &env{db: db, reg: reg, client: c}
}

// logs is a slog handler that keeps every message, for tests to wait for
// one: a log line is often the only sign that something happened inside a
// runner (a claim that timed out, a renewal that failed).
type logs struct {
	mu    sync.Mutex
	seen  map[string]int
	attrs map[string]map[string]string // of each message's first record
	cond  *sync.Cond
	lvl   slog.Level
}

func newLogs(lvl slog.Level) *logs {
	l := &logs{seen: map[string]int{}, attrs: map[string]map[string]string{}, lvl: lvl}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *logs) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= l.lvl }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler             { return l }
func (l *logs) WithGroup(string) slog.Handler                  { return l }
func (l *logs) Handle(_ context.Context, rec slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[rec.Message]++
	if l.attrs[rec.Message] == nil {
		attrs := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		l.attrs[rec.Message] = attrs
	}
	l.cond.Broadcast()
	return nil
}

// count returns how often msg was logged, and the attributes of its first
// record.
func (l *logs) count(msg string) (int, map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[msg], l.attrs[msg]
}

func (l *logs) option() queue.InstrumentOption { return queue.WithLogger(slog.New(l)) }

// wait blocks until msg has been logged n times, or fails the test after a
// generous deadline.
func (l *logs) wait(t *testing.T, msg string, n int) {
	t.Helper()
	timedOut := false
	deadline := time.AfterFunc(60*time.Second, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		timedOut = true
		l.cond.Broadcast()
	})
	defer deadline.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.seen[msg] < n {
		if timedOut {
			t.Fatalf("timed out waiting for the log message %q", msg)
		}
		l.cond.Wait()
	}
}
