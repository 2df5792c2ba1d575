package queue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Start fails at once, and starts nothing, against a server that does not
// answer, rather than logging a failed claim every second.
func TestStartFailsAtOnceWithoutADatabase(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now
	db, err := gorm.Open(postgres.Open("postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=5"),
		&gorm.Config{Logger: logger.Discard, DisableAutomaticPing: true})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, nopHandler[noop]()))
	c, err := queue.NewClient(db, reg, quiet())
	require.NoError(t, err)
	r, err := queue.NewRunner(c)
	require.NoError(t, err)
	err = r.Start(context.Background())
	require.ErrorContains(t, err, "queue: start: the database did not answer")
	require.NoError(t, r.Stop(context.Background()))
	<-r.Done()
}

// Start names Migrate when the schema is missing or older than this sheaf,
// and refuses a schema that a newer sheaf migrated.
func TestStartNamesMigrate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, nopHandler[noop]()))
	c, err := queue.NewClient(db.Gorm, reg, quiet())
	require.NoError(t, err)
	r, err := queue.NewRunner(c)
	require.NoError(t, err)

	err = r.Start(context.Background())
	require.ErrorIs(t, err, queue.ErrNotMigrated, "never migrated")
	require.ErrorContains(t, err, "call Client.Migrate")

	require.NoError(t, c.Migrate(context.Background()))
	require.NoError(t, db.Gorm.Exec("DELETE FROM sheaf_migrations WHERE version = ?", queue.SchemaVersion).Error)
	err = r.Start(context.Background())
	require.ErrorIs(t, err, queue.ErrNotMigrated, "migrated by an older sheaf")
	require.ErrorContains(t, err, "the schema is at version")

	require.NoError(t, db.Gorm.Exec("INSERT INTO sheaf_migrations (version) VALUES (?), (?)", queue.SchemaVersion, queue.SchemaVersion+1).Error)
	err = r.Start(context.Background())
	require.ErrorIs(t, err, queue.ErrSchemaTooNew, "migrated by a newer sheaf")
	require.ErrorContains(t, err, fmt.Sprintf("the database is at version %d, this sheaf knows %d", queue.SchemaVersion+1, queue.SchemaVersion))

	require.NoError(t, db.Gorm.Exec("DELETE FROM sheaf_migrations WHERE version > ?", queue.SchemaVersion).Error)
	require.NoError(t, r.Start(context.Background()), "a failed Start may be tried again")
	require.NoError(t, r.Stop(context.Background()))
}

// With database/sql's default of two idle connections, handlers that each
// take a connection open and close them all the time: the runner sees the
// pool close them (DBStats.MaxIdleClosed) while it runs, warns once, and
// says what to set. A pool sized as the queue documentation says gets no warning.
func TestRunnerWarnsWhenThePoolKeepsTooFewIdle(t *testing.T) {
	t.Parallel()
	const workers = 10
	var (
		pool    atomic.Pointer[sql.DB]
		arrived atomic.Int32
		all     atomic.Pointer[chan struct{}] // closed when every handler of a round holds a connection
	)
	// Each handler takes a connection of the pool and holds it until all
	// the round's handlers hold one: workers connections at once.
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		conn, err := pool.Load().Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		ch := *all.Load()
		if arrived.Add(1) == workers {
			close(ch)
		}
		select {
		case <-ch:
			return conn.PingContext(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	round := func() {
		arrived.Store(0)
		ch := make(chan struct{})
		all.Store(&ch)
		ids := make([]int64, workers)
		for i := range ids {
			ids[i] = enqueue(t, e, report{})
		}
		jobs, err := e.client.Wait(context.Background(), ids...)
		require.NoError(t, err)
		for _, j := range jobs {
			require.Equal(t, queue.StatusCompleted, j.Status)
		}
	}
	start := func(configure func(*sql.DB)) (*queue.Runner, *logs, *sql.DB) {
		db, err := pgtest.OpenDSN(e.db.DSN)
		require.NoError(t, err)
		sqlDB, err := db.DB()
		require.NoError(t, err)
		t.Cleanup(func() { _ = sqlDB.Close() })
		configure(sqlDB)
		pool.Store(sqlDB)
		l := newLogs(slog.LevelWarn)
		c, err := queue.NewClient(db, e.reg, l.option())
		require.NoError(t, err)
		r, err := queue.NewRunner(c, queue.WithWorkers(workers), queue.WithPollInterval(20*time.Millisecond))
		require.NoError(t, err)
		queue.WatchIdle(r, 10*time.Millisecond, 1)
		require.NoError(t, r.Start(context.Background()))
		return r, l, sqlDB
	}

	r, l, _ := start(func(db *sql.DB) { db.SetMaxIdleConns(2) }) // database/sql's default
	round()
	l.wait(t, queue.PoolWarning, 1) // seen while the runner runs
	round()
	require.NoError(t, r.Stop(context.Background()))
	n, attrs := l.count(queue.PoolWarning)
	require.Equal(t, 1, n, "warned once")
	require.Contains(t, attrs["advice"], "because it keeps too few idle")
	require.Contains(t, attrs["advice"], "SetMaxIdleConns(14)")

	r, l, sqlDB := start(func(db *sql.DB) {
		db.SetMaxOpenConns(workers + 4)
		db.SetMaxIdleConns(workers + 4)
	})
	round()
	require.NoError(t, r.Stop(context.Background())) // the watch looks a last time
	require.Zero(t, sqlDB.Stats().MaxIdleClosed)
	n, _ = l.count(queue.PoolWarning)
	require.Zero(t, n, "a pool sized for the workers")
}

// Cancelling Start's context stops the runner as Stop does when its context
// ends: claims stop, the running job is cancelled with ErrStopping and goes
// back to the queue uncounted, and Done is closed once it has.
func TestCancelledStartContextStopsTheRunner(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 1)
	var calls atomic.Int32
	e := newEnv(t, registerReport(t, func(ctx context.Context, _ *queue.Job[report]) error {
		if calls.Add(1) > 1 {
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := queue.NewRunner(e.client, queue.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	id := enqueue(t, e, report{})
	e.events.Wait(t, queue.EventStarted, id, 1)
	cancel()
	require.ErrorIs(t, <-causes, queue.ErrStopping)
	<-a.Done()
	require.NoError(t, a.Stop(context.Background()), "Stop after the runner stopped returns at once")
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.Zero(t, rec.Attempts, "not counted")
	require.Equal(t, []queue.EventType{queue.EventStarted, queue.EventRequeued}, e.events.Of(id))

	b := e.runner(t)
	jobs := make([]queue.Params, 20)
	for i := range jobs {
		jobs[i] = queue.Params{Args: noop{}}
	}
	_, err = e.client.EnqueueMany(context.Background(), jobs)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventCompleted, 0, 21)
	require.Equal(t, int64(1), a.Stats().Claimed, "the stopped runner claimed nothing more")
	require.Equal(t, int64(21), b.Stats().Completed, "the requeued job and the twenty")
}

func TestWait(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		if j.Args.County == "fail" {
			return queue.Permanent(errors.New("no"))
		}
		<-release
		return nil
	}))
	ok, fails := enqueue(t, e, report{County: "ok"}), enqueue(t, e, report{County: "fail"})
	e.runner(t)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := e.client.Wait(short, ok, fails)
	require.ErrorIs(t, err, context.DeadlineExceeded, "one job is still running")

	close(release)
	recs, err := e.client.Wait(context.Background(), ok, fails)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, ok, recs[0].ID)
	require.Equal(t, queue.StatusCompleted, recs[0].Status)
	require.Equal(t, queue.StatusFailed, recs[1].Status)

	_, err = e.client.Wait(context.Background(), ok, 987654)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

type panickyBackoff struct{}

func (panickyBackoff) Delay(int) time.Duration { panic("backoff bug") }

// A kind's Backoff is the user's code: if it panics, the runner survives,
// and the job retries after the default backoff's delay.
func TestPanickingBackoffFallsBackToTheDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(context.Context, *queue.Job[report]) error {
		return errors.New("transient")
	}, queue.RetryBackoff(panickyBackoff{})))
	id := enqueue(t, e, report{})
	r := e.runner(t)
	ev := e.events.Wait(t, queue.EventRetrying, id, 1)[0]
	require.InDelta(t, time.Second, ev.RetryIn, float64(150*time.Millisecond), "the default's first delay, 1 s ±10%")
	other := enqueue(t, e, noop{})
	e.events.Wait(t, queue.EventCompleted, other, 1)
	require.Equal(t, int64(1), r.Stats().Retried)
}
