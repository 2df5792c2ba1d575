package alert_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// The example runs on SQLite, so it needs no filter: the tests skip
// themselves when their store is not there.
func TestMain(m *testing.M) {
	if sendingChild() { // the process the kill test kills
		return
	}
	goleak.VerifyTestMain(testexit.M(m), testexit.Option())
}

// report is the tests' job kind.
type report struct {
	County string `json:"county"`
}

func (report) Kind() string { return "report" }

// clock is a clock the tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder is a sink that keeps what it is sent, and fails while told to.
type recorder struct {
	mu      sync.Mutex
	got     []alert.Notice
	fail    int // fail this many sends first
	failed  int
	lose    int // take this many, then fail as if the answer were lost
	sendErr error
}

func (r *recorder) Send(_ context.Context, n alert.Notice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		r.failed++
		return r.sendErr
	}
	r.got = append(r.got, n)
	if r.lose > 0 {
		r.lose--
		return r.sendErr
	}
	return nil
}

func (r *recorder) notices() []alert.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alert.Notice(nil), r.got...)
}

// types lists the notices' types and keys, "firing job 3", in order.
func (r *recorder) types() []string {
	var out []string
	for _, n := range r.notices() {
		out = append(out, n.Type+" "+n.Key)
	}
	return out
}

// env is a test's database, client, clock and sink.
type env struct {
	db     *pgtest.DB
	client *queue.Client
	clock  *clock
	sink   *recorder
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newEnv(t *testing.T) *env {
	t.Helper()
	db := queuetest.NewDB(t)
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return &env{db: db, client: c, clock: &clock{t: db.Now(t)}, sink: &recorder{sendErr: errors.New("receiver down")}}
}

// alerter returns an Alerter on e's client, clock and sink with opts.
func (e *env) alerter(t *testing.T, opts ...alert.Option) *alert.Alerter {
	t.Helper()
	a, err := alert.New(e.client, append([]alert.Option{alert.WithClock(e.clock.now), alert.WithLogger(quiet()),
		alert.WithSink("test", e.sink)}, opts...)...)
	require.NoError(t, err)
	return a
}

// run runs a round and requires it to succeed.
func run(t *testing.T, a *alert.Alerter) {
	t.Helper()
	_, err := a.Run(context.Background())
	require.NoError(t, err)
}

// enqueue enqueues a report job with opts and returns its ID.
func (e *env) enqueue(t *testing.T, opts ...queue.EnqueueOption) int64 {
	t.Helper()
	res, err := e.client.Enqueue(context.Background(), report{County: "Kent"}, opts...)
	require.NoError(t, err)
	return res.Job.ID
}

// fail makes job id FAILED, for good, with msg, now.
func (e *env) fail(t *testing.T, id int64, msg string) {
	t.Helper()
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'FAILED', attempts = 1, claims = 1, started_at = ?, completed_at = ?, last_error = ? WHERE id = ?",
		e.db.Time(e.db.Now(t)), e.db.Time(e.db.Now(t)), msg, id).Error)
}

// episodes returns the episodes of the alerter, newest first.
func episodes(t *testing.T, a *alert.Alerter, states ...string) []alert.Episode {
	t.Helper()
	eps, err := a.Episodes(context.Background(), alert.EpisodeQuery{States: states})
	require.NoError(t, err)
	return eps
}
