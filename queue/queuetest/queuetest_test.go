package queuetest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/queuetest"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

type summaryArgs struct{ Report int64 }

func (summaryArgs) Kind() string { return "county_summary" }

// fakeT records the failures of the Require functions.
type fakeT struct {
	testing.TB
	mu    sync.Mutex
	fails []string
}

func (*fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = append(f.fails, fmt.Sprintf(format, args...))
}

// failure returns the one failure f recorded.
func (f *fakeT) failure(t *testing.T) string {
	t.Helper()
	require.Len(t, f.fails, 1, "failures: %q", f.fails)
	return f.fails[0]
}

type env struct {
	db     *gorm.DB
	client *queue.Client
	reg    *queue.Registry
}

// setup opens a migrated queue on a new SQLite file whose registry has
// writeReport and a summary that each completed report releases.
func setup(t *testing.T, opts ...queue.ClientOption) env {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		sqlDB.Close()
	})
	reg := registry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[summaryArgs](func(context.Context, *queue.Job[summaryArgs]) error { return nil }), queue.OnQueue("reports")))
	require.NoError(t, queue.Depend(reg, queue.Rule{Name: "summary", Parents: []string{"county_report"}, Each: true},
		func(p []queue.JobRecord) (summaryArgs, []queue.EnqueueOption) {
			return summaryArgs{Report: p[0].ID}, nil
		}))
	c, err := queue.NewClient(db, reg, opts...)
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return env{db: db, client: c, reg: reg}
}

var admin = queue.AuthContext(queue.Auth{"role": "ADMIN"})

func TestAttemptRecordsAndRefusesAfterCancel(t *testing.T) {
	t.Parallel()
	a := queuetest.NewAttempt(ReportArgs{County: "Travis"})
	a.Cancel() // before Run: Run starts cancelled
	var errs []error
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](func(ctx context.Context, j *queue.Job[ReportArgs]) error {
		errs = append(errs, j.SetProgress(ctx, 1, 2), j.SetOutput(ctx, 1), j.CompleteTx(ctx, &gorm.DB{}))
		return context.Cause(ctx)
	}))
	require.ErrorIs(t, err, queue.ErrCancelled)
	require.ErrorIs(t, a.Cause(), queue.ErrCancelled)
	for _, e := range errs {
		require.ErrorIs(t, e, queue.ErrLeaseLost)
	}
	p, total := a.Progress()
	require.Zero(t, p+total)
	require.Nil(t, a.Output())
	require.False(t, a.CompletedTx())
}

func TestAttemptCancelWhileRunning(t *testing.T) {
	t.Parallel()
	a := queuetest.NewAttempt(ReportArgs{County: "Travis"})
	started := make(chan struct{})
	go func() {
		<-started
		a.Cancel()
	}()
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](func(ctx context.Context, j *queue.Job[ReportArgs]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	require.ErrorIs(t, err, queue.ErrCancelled)
}

func TestAttemptParentsCompleteTxAndCause(t *testing.T) {
	t.Parallel()
	a := queuetest.NewAttempt(summaryArgs{Report: 7})
	a.Job.ParentIDs = []int64{9, 7}
	a.Parents = []queue.JobRecord{{ID: 9, Kind: "b"}, {ID: 8, Kind: "x"}, {ID: 7, Kind: "a"}}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("test over")
	var kinds []string
	err := a.Run(ctx, queue.HandlerFunc[summaryArgs](func(ctx context.Context, j *queue.Job[summaryArgs]) error {
		ps, err := j.Parents(ctx)
		for _, p := range ps {
			kinds = append(kinds, p.Kind)
		}
		require.ErrorIs(t, j.CompleteTx(ctx, nil), queue.ErrInvalidOption)
		require.NoError(t, j.CompleteTx(ctx, &gorm.DB{}))
		cancel(stop)
		return err
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, kinds)
	require.True(t, a.CompletedTx())
	require.ErrorIs(t, a.Cause(), stop)
}

func TestAttemptRunFailures(t *testing.T) {
	t.Parallel()
	a := queuetest.NewAttempt(ReportArgs{})
	require.ErrorIs(t, a.Run(context.Background(), nil), queue.ErrInvalidOption)
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](func(context.Context, *queue.Job[ReportArgs]) error {
		panic("boom")
	}))
	require.ErrorContains(t, err, "job 1 (county_report) panicked: boom")
	require.Nil(t, a.Cause())
	// A handler built by hand has no recorder: its calls do nothing.
	j := queuetest.NewJob(ReportArgs{})
	require.NoError(t, j.SetProgress(context.Background(), 1, 1))
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, "county_report", j.Kind)
}

func TestRequireEnqueuedFailures(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	travis := ReportArgs{County: "Travis", Rows: 1}

	f := &fakeT{}
	queuetest.RequireEnqueued(f, e.client, travis, queuetest.Want{})
	require.Equal(t, "queuetest: no county_report job enqueued", f.failure(t))

	runAt := time.Now().Add(time.Hour)
	_, err := e.client.Enqueue(ctx, travis, queue.Priority(9), queue.RunAt(runAt), queue.MaxAttempts(4),
		queue.CorrelationID("req-1"), admin)
	require.NoError(t, err)
	got := queuetest.RequireEnqueued(t, e.client, travis, queuetest.Want{Queue: "reports", Priority: 9, MaxAttempts: 4,
		RunAt: runAt, CorrelationID: "req-1", Status: queue.StatusQueued, Auth: queue.Auth{"role": "ADMIN"}})
	require.JSONEq(t, `{"County":"Travis","Rows":1}`, string(got.Payload))

	for name, w := range map[string]queuetest.Want{
		"priority": {Priority: 8}, "queue": {Queue: "default"}, "attempts": {MaxAttempts: 3}, "run at": {RunAt: runAt.Add(time.Second)},
		"key": {IdempotencyKey: "k"}, "correlation": {CorrelationID: "req-2"}, "status": {Status: queue.StatusFailed},
		"auth": {Auth: queue.Auth{"role": "CASE_WORKER"}},
	} {
		f := &fakeT{}
		queuetest.RequireEnqueued(f, e.client, travis, w)
		msg := f.failure(t)
		require.True(t, strings.HasPrefix(msg, `queuetest: no county_report job with args {"County":"Travis","Rows":1} matching`), "%s: %s", name, msg)
		require.Contains(t, msg, "priority 9 max attempts 4", name)
		require.NotContains(t, msg, "ADMIN", "%s: the claims stay out of messages", name)
	}
	f = &fakeT{}
	queuetest.RequireEnqueued(f, e.client, ReportArgs{County: "Harris"}, queuetest.Want{})
	require.Contains(t, f.failure(t), `no county_report job with args {"County":"Harris","Rows":0}`)

	_, err = e.client.Enqueue(ctx, travis)
	require.NoError(t, err)
	f = &fakeT{}
	queuetest.RequireEnqueued(f, e.client, travis, queuetest.Want{})
	require.Contains(t, f.failure(t), "queuetest: 2 county_report jobs with args")

	f = &fakeT{}
	queuetest.RequireNotEnqueued[ReportArgs](f, e.client)
	require.Contains(t, f.failure(t), "queuetest: 2 county_report jobs enqueued, want none; the first:   job 1:")
	queuetest.RequireNotEnqueued[summaryArgs](t, e.client)

	jobs, err := queuetest.ListEnqueued[ReportArgs](ctx, e.client)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, travis, jobs[1].Args)
}

func TestListEnqueuedFailsOnAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer func() {
		sqlDB, _ := db.DB()
		sqlDB.Close()
	}()
	c, err := queue.NewClient(db, registry())
	require.NoError(t, err)
	_, err = queuetest.ListEnqueued[ReportArgs](context.Background(), c)
	require.ErrorIs(t, err, queue.ErrNotMigrated)
	f := &fakeT{}
	queuetest.RequireNotEnqueued[ReportArgs](f, c)
	require.Contains(t, f.failure(t), "queuetest: list county_report jobs")

	_, err = queuetest.WorkDue(context.Background(), c, queue.WithQueues("reports"))
	require.ErrorIs(t, err, queue.ErrNotMigrated)
}

func TestWorkDueWorksReleasedChildrenAndLeavesBackoffs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := e.client.Enqueue(ctx, ReportArgs{County: "Travis", Rows: 100}, admin)
	require.NoError(t, err)
	_, err = e.client.Enqueue(ctx, ReportArgs{County: "Bexar"}, admin, queue.RunAt(time.Now().Add(time.Hour)))
	require.NoError(t, err)
	stats, err := queuetest.WorkDue(ctx, e.client, queue.WithQueues("reports"))
	require.NoError(t, err)
	require.Equal(t, int64(2), stats.Completed, "the report and the summary it released")
	summary := queuetest.RequireEnqueued(t, e.client, summaryArgs{Report: 1}, queuetest.Want{Status: queue.StatusCompleted})
	require.Equal(t, queue.IDs{1}, summary.ParentIDs)
	queuetest.RequireEnqueued(t, e.client, ReportArgs{County: "Bexar"}, queuetest.Want{Status: queue.StatusQueued})

	_, err = queuetest.WorkDue(ctx, e.client, queue.WithWorkers(0))
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = queuetest.WorkDue(done, e.client, queue.WithQueues("reports"))
	require.ErrorIs(t, err, context.Canceled)
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 12, 8, 22, 0, 0, 0, time.UTC)
	c := queuetest.NewClock(start)
	require.Equal(t, start, <-c.After(0))
	two := c.Waiting(2)
	hour := c.After(time.Hour)
	select {
	case <-two:
		t.Fatal("two waiting with one")
	default:
	}
	minute := c.After(time.Minute)
	<-two
	<-c.Waiting(1)
	c.Advance(30 * time.Second)
	c.Set(start.Add(-time.Hour)) // backwards: nothing fires
	c.Set(start.Add(time.Minute))
	require.Equal(t, start.Add(time.Minute), <-minute)
	select {
	case <-hour:
		t.Fatal("the hour fired at a minute")
	default:
	}
	<-c.Waiting(1) // the hour
	c.Advance(59 * time.Minute)
	require.Equal(t, start.Add(time.Hour), <-hour)
	require.Equal(t, start.Add(time.Hour), c.Now())
}

// TestOnPostgreSQL: jsonb stores args with its keys reordered, and a
// transaction's jobs are seen through its TxClient only.
func TestOnPostgreSQL(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	c, err := queue.NewClient(pg.Gorm, registry())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Migrate(ctx))
	args := ReportArgs{County: "Travis", Rows: 100}
	err = pg.Gorm.Transaction(func(tx *gorm.DB) error {
		txc := c.Tx(tx)
		if _, err := txc.Enqueue(ctx, args, admin); err != nil {
			return err
		}
		queuetest.RequireEnqueued(t, txc, args, queuetest.Want{Queue: "reports"})
		queuetest.RequireNotEnqueued[ReportArgs](t, c)
		return nil
	})
	require.NoError(t, err)
	stats, err := queuetest.WorkDue(ctx, c, queue.WithQueues("reports"))
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.Completed)
	queuetest.RequireEnqueued(t, c, args, queuetest.Want{Status: queue.StatusCompleted})
}
