package gormbatch_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
	"github.com/sheaf-dev/sheaf/cleanup"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// A backend terminated while it writes sub-batch 2: the batch fails and is
// cleaned up, batches alongside complete, and batches sent afterwards are
// written on fresh connections.
func TestBackendTerminatedMidSubBatch(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		lock := e.block()
		r := start(t, e.table(opts...), batch.WithMaxBatchSize(1000))

		victim := orders(2500)
		victim[1500].Note = "block" // sub-batch 2 waits for the test's lock
		r.send("VICTIM", victim)
		r.send("ALONGSIDE", orders(3000))

		pid := lock.waiter()
		var terminated bool
		require.NoError(t, e.SQL.QueryRow("SELECT pg_terminate_backend($1)", pid).Scan(&terminated))
		require.True(t, terminated)
		o := r.await("VICTIM")
		lock.release()

		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 2, o.Seq)
		require.NoError(t, o.CleanupErr)
		var pe *batch.ProcessError
		require.ErrorAs(t, o.Err, &pe)
		require.Equal(t, 2, pe.Seq)
		var pg *pgconn.PgError
		require.ErrorAs(t, o.Err, &pg)
		require.Equal(t, "57P01", pg.Code, "admin_shutdown: the backend was terminated")
		require.Equal(t, int64(0), e.rows("VICTIM"))
		require.Equal(t, int64(1000), e.deleted("VICTIM"), "cleanup removed sub-batch 1; the server rolled back sub-batch 2")

		// The pool replaces the dead connection: later batches are written.
		for i := range 4 {
			r.send(fmt.Sprintf("AFTER-%d", i), orders(2100))
		}
		r.shutdown()
		require.Equal(t, batch.Completed, r.outcome("ALONGSIDE").Status)
		require.Equal(t, int64(3000), e.rows("ALONGSIDE"))
		for i := range 4 {
			id := fmt.Sprintf("AFTER-%d", i)
			require.Equal(t, batch.Completed, r.outcome(id).Status)
			require.Equal(t, int64(2100), e.rows(id))
		}
	})
}

// The context of a sub-batch ends while its COMMIT is in the server. Process
// must still say truly whether the sub-batch was committed: if it reported a
// failure for a COMMIT that lands later, the coordinator's cleanup could run
// before it and leave the rows behind.
func TestStopDuringCommit(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		lock := e.block()
		tbl := e.table(opts...)
		items := orders(100)
		items[50].Note = "block at commit"
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tbl.Process(ctx, batch.Batch[Order]{ID: "C", Seq: 1, Items: items}) }()
		lock.waiter() // the COMMIT waits for the test's lock
		cancel()
		lock.release()
		err := <-done
		require.NoError(t, err, "the COMMIT was sent, so Process waits for its answer")
		require.Equal(t, int64(100), e.rows("C"))

		// Stopped before the COMMIT is sent: rolled back, and said so.
		items = orders(100)
		items[50].Note = "block"
		ctx, cancel = context.WithCancel(t.Context())
		lock.hold()
		go func() { done <- tbl.Process(ctx, batch.Batch[Order]{ID: "D", Seq: 1, Items: items}) }()
		lock.waiter()
		cancel()
		err = <-done
		lock.release()
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, int64(0), e.rows("D"))
	})
}

// A cleanup that fails: the outcome carries its error, the batch is reported
// failed (never complete), and a later call finishes the job.
func TestCleanupFails(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		e.exec(`
CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'deleting % is not allowed', OLD.batch_id USING ERRCODE = 'P0001';
END $$;
CREATE TRIGGER refuse_delete BEFORE DELETE ON orders FOR EACH ROW
	WHEN (OLD.batch_id = 'STUCK') EXECUTE FUNCTION refuse_delete();`)
		tbl := e.table(opts...)
		r := start(t, tbl, batch.WithMaxBatchSize(1000))
		items := orders(2500)
		items[1200].Cents = -1
		r.send("STUCK", items)
		r.send("FINE", orders(1500))
		r.shutdown()

		o := r.outcome("STUCK")
		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 2, o.Seq)
		requireConstraintViolation(t, o.Err, 2)
		require.ErrorContains(t, o.CleanupErr, `gormbatch: delete batch "STUCK" from orders`)
		var pg *pgconn.PgError
		require.ErrorAs(t, o.CleanupErr, &pg)
		require.Equal(t, "P0001", pg.Code)
		s := r.c.Stats()
		require.Equal(t, int64(1), s.CleanupFailures)
		require.Equal(t, int64(1), s.BatchesCompleted, "only FINE")
		require.Equal(t, batch.Completed, r.outcome("FINE").Status)
		require.Equal(t, int64(1000), e.rows("STUCK"), "the failed cleanup left sub-batch 1 in place")

		e.exec("DROP TRIGGER refuse_delete ON orders")
		require.NoError(t, tbl.Cleanup(t.Context(), "STUCK", 2))
		require.Equal(t, int64(0), e.rows("STUCK"))
		require.NoError(t, tbl.Cleanup(t.Context(), "STUCK", 2), "idempotent")
		require.Equal(t, int64(1500), e.rows("FINE"))
	})
}

// explosive is an order whose note's driver.Valuer panics on "boom": user
// code that runs inside the write, on both paths.
type explosive struct {
	ID        int64 `gorm:"primaryKey"`
	BatchID   string
	Line      int
	Cents     int64
	Note      fuse
	CreatedAt time.Time
}

func (explosive) TableName() string { return "orders" }

type fuse string

func (f fuse) Value() (driver.Value, error) {
	if f == "boom" {
		panic("the note exploded")
	}
	return string(f), nil
}

// trapped is an order whose gorm hooks panic on a note that names them: user
// code that runs inside gorm's Create, within the sub-batch's transaction.
// BeforeCreate runs before the INSERT, AfterCreate after it. Only the gorm
// path runs hooks.
type trapped struct{ Order }

func (trapped) TableName() string { return "orders" }

func (h *trapped) BeforeCreate(*gorm.DB) error {
	if h.Note == "boom BeforeCreate" {
		panic("BeforeCreate exploded")
	}
	return nil
}

func (h *trapped) AfterCreate(*gorm.DB) error {
	if h.Note == "boom AfterCreate" {
		panic("AfterCreate exploded")
	}
	return nil
}

// A panic inside the write of sub-batch 2, after sub-batch 1 was committed:
// from a Valuer on both paths, from a gorm hook before or after the INSERT on
// the gorm path. Sub-batch 2 is rolled back, sub-batch 1 is cleaned up, the
// panic is reported with sequence -1 (cleanup.SeqUnknown), no connection is
// left in use, other batches keep their rows, and the coordinator goes on
// writing. TestPanicLeavesNoConnectionBehind is the same for Process alone.
func TestPanicWhileWriting(t *testing.T) {
	t.Run("Valuer", func(t *testing.T) {
		t.Parallel()
		eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
			mk := func(line int, note string) explosive { return explosive{Line: line, Cents: 1, Note: fuse(note)} }
			panicWhileWriting(t, mk, "boom", "the note exploded", opts...)
		})
	})
	for _, hook := range []string{"BeforeCreate", "AfterCreate"} {
		t.Run(hook, func(t *testing.T) {
			t.Parallel()
			mk := func(line int, note string) trapped { return trapped{Order{Line: line, Cents: 1, Note: note}} }
			panicWhileWriting(t, mk, "boom "+hook, hook+" exploded")
		})
	}
}

// panicWhileWriting sends a batch of model T whose item 1700, in sub-batch 2,
// panics with want when written, having mk(line, boom) make that item.
func panicWhileWriting[T any](t *testing.T, mk func(line int, note string) T, boom, want string, opts ...gormbatch.Option) {
	e := newEnv(t)
	tbl, err := gormbatch.New[T](e.Gorm, opts...)
	require.NoError(t, err)
	items := func(n int) []T {
		out := make([]T, n)
		for i := range out {
			out[i] = mk(i, "n")
		}
		return out
	}
	r := start(t, tbl, batch.WithMaxBatchSize(1000))
	r.send("BEFORE", items(1500))
	require.Equal(t, batch.Completed, r.await("BEFORE").Status)

	victim := func() []T {
		out := items(2500)
		out[1700] = mk(1700, boom)
		return out
	}
	r.send("BOOM", victim())
	r.send("CALM", items(2500))

	o := r.await("BOOM")
	require.Equal(t, batch.Failed, o.Status)
	require.Equal(t, cleanup.SeqUnknown, o.Seq)
	require.Equal(t, 1, o.SubBatches, "sub-batch 1 was committed before the panic")
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "process", pe.Op)
	require.Equal(t, 2, pe.Seq, "the error still names the sub-batch")
	var panicErr *batch.PanicError
	require.ErrorAs(t, o.Err, &panicErr)
	require.ErrorContains(t, o.Err, want)
	require.NoError(t, o.CleanupErr)
	require.Equal(t, int64(0), e.rows("BOOM"))
	require.Equal(t, int64(1000), e.deleted("BOOM"), "only sub-batch 1 was committed; sub-batch 2 rolled back")

	// Once the outcomes are in, no worker is writing: a connection still in
	// use is one the panic kept.
	require.Equal(t, batch.Completed, r.await("CALM").Status)
	require.Equal(t, 0, e.SQL.Stats().InUse, "a connection leaked")

	// The workers survived: later batches are written, one of them panicking
	// again.
	for i := range 3 {
		r.send(fmt.Sprintf("AFTER-%d", i), items(2100))
	}
	r.send("BOOM-AGAIN", victim())
	r.shutdown()
	require.Equal(t, 0, e.SQL.Stats().InUse, "a connection leaked")
	require.Equal(t, batch.Failed, r.outcome("BOOM-AGAIN").Status)
	require.ErrorContains(t, r.outcome("BOOM-AGAIN").Err, want)
	require.Equal(t, int64(0), e.rows("BOOM-AGAIN"))
	for i := range 3 {
		id := fmt.Sprintf("AFTER-%d", i)
		require.Equal(t, batch.Completed, r.outcome(id).Status)
		require.Equal(t, int64(2100), e.rows(id))
	}
	require.Equal(t, int64(1500), e.rows("BEFORE"))
	require.Equal(t, int64(2500), e.rows("CALM"))
	require.Equal(t, int64(1500+2500+3*2100), e.Count(t, "SELECT count(*) FROM orders"), "no stray rows")
	require.Equal(t, int64(0), e.deleted("BEFORE")+e.deleted("CALM"), "cleanup touched the failed batches only")
	s := r.c.Stats()
	require.Equal(t, int64(2), s.BatchesFailed)
	require.Equal(t, int64(5), s.BatchesCompleted)
	require.Equal(t, int64(0), s.CleanupFailures)
}

// Shutdown while producers send and sub-batches are being written, one of
// them held inside the database: everything sent is either persisted
// completely or reported failed or incomplete and left no row.
func TestShutdownUnderLoad(t *testing.T) {
	for _, hard := range []bool{false, true} {
		name := "graceful"
		if hard {
			name = "hard"
		}
		t.Run(name, func(t *testing.T) {
			eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
				shutdownUnderLoad(t, hard, opts...)
			})
		})
	}
}

func shutdownUnderLoad(t *testing.T, hard bool, opts ...gormbatch.Option) {
	e := newEnv(t)
	lock := e.block()
	r := start(t, e.table(opts...), batch.WithMaxBatchSize(500))

	// SLOW's second sub-batch waits in the database for the test's lock.
	slow := orders(1200)
	slow[700].Note = "block"
	r.send("SLOW", slow)

	// Producers send batches of varied sizes until the coordinator refuses.
	const producers = 4
	type sent struct {
		items int64
		ended bool
	}
	var (
		mu      sync.Mutex
		sends   = map[string]*sent{}
		wg      sync.WaitGroup
		started sync.WaitGroup // each producer has finished a few batches
		refused = make(chan struct{})
		once    sync.Once
	)
	// stop tells a producer to stop: the coordinator refused, because
	// Shutdown has begun, or something failed.
	stop := func(err error) bool {
		if errors.Is(err, batch.ErrClosed) {
			once.Do(func() { close(refused) })
			return true
		}
		return !assert.NoError(t, err)
	}
	started.Add(producers)
	for p := range producers {
		wg.Go(func() {
			for k := 0; ; k++ {
				if k == 3 {
					started.Done()
				}
				id := fmt.Sprintf("P%d-%03d", p, k)
				s := &sent{}
				mu.Lock()
				sends[id] = s
				mu.Unlock()
				for chunk := range 1 + (p+k)%4 {
					n := 1 + (chunk*331+k*97)%450
					if stop(r.c.SendMany(context.Background(), id, orders(n))) {
						return
					}
					mu.Lock()
					s.items += int64(n)
					mu.Unlock()
				}
				if stop(r.c.Send(context.Background(), batch.End[Order](id))) {
					return
				}
				mu.Lock()
				s.ended = true
				mu.Unlock()
			}
		})
	}
	started.Wait()
	lock.waiter() // SLOW is writing

	if hard {
		// A deadline that has passed: in-flight writes are cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, r.c.Shutdown(ctx), context.Canceled)
		<-r.c.Done() // the workers unwind: SLOW's blocked write is cancelled
	} else {
		// Let SLOW go on once the coordinator refuses sends, that is once
		// Shutdown has begun; Shutdown then waits for it.
		released := make(chan struct{})
		go func() {
			defer close(released)
			<-refused
			lock.release()
		}()
		require.NoError(t, r.c.Shutdown(context.Background()))
		<-released
	}
	wg.Wait()
	if hard {
		lock.release()
	}

	mu.Lock()
	defer mu.Unlock()
	sends["SLOW"] = &sent{items: 1200, ended: true}
	var persisted int64
	for id, s := range sends {
		if s.items == 0 && !s.ended {
			continue // refused before anything was sent: no batch
		}
		o := r.outcome(id)
		rows := e.rows(id)
		switch o.Status {
		case batch.Completed:
			require.True(t, s.ended, "%s completed without its end", id)
			require.Equal(t, s.items, rows, "%s completed: every item persisted", id)
			persisted += rows
		case batch.Failed, batch.Incomplete:
			require.Equal(t, int64(0), rows, "%s %s: no row left", id, o.Status)
			require.NoError(t, o.CleanupErr)
		}
	}
	slowOutcome := r.outcome("SLOW")
	if hard {
		require.Equal(t, batch.Incomplete, slowOutcome.Status)
		require.ErrorIs(t, slowOutcome.Err, context.Canceled)
		require.ErrorIs(t, slowOutcome.Err, batch.ErrStopped)
		require.Equal(t, int64(500), e.deleted("SLOW"), "its committed sub-batch 1 was cleaned up")
	} else {
		require.Equal(t, batch.Completed, slowOutcome.Status, "an in-flight batch finishes during a graceful shutdown")
	}
	s := r.c.Stats()
	require.Equal(t, s.ItemsReceived, s.ItemsProcessed+s.ItemsDiscarded)
	require.Equal(t, int64(0), s.InFlight)
	require.Equal(t, persisted, e.Count(t, "SELECT count(*) FROM orders"), "no stray rows")
}

// The server restarts while a batch waits in its second sub-batch: that
// batch fails at sub-batch 2, and its cleanup, which starts while the
// server is going down (on a pooled connection the restart cut, or none at
// all), tries again until it is back and removes sub-batch 1. Batches sent
// after the restart are written on new connections. The write paths take
// turns on one server, which costs more to create than their batches do
// to write.
func TestServerRestartedMidBatch(t *testing.T) {
	t.Parallel()
	cl := pgtest.NewCluster(t)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			serverRestartedMidBatch(t, cl, p.opts...)
		})
	}
}

// serverRestartedMidBatch is TestServerRestartedMidBatch on one write
// path; it leaves cl's schema as it found it.
func serverRestartedMidBatch(t *testing.T, cl *pgtest.Cluster, opts ...gormbatch.Option) {
	e := envOn(t, cl.DB)
	// For the next path: the tables, and the functions of their triggers.
	t.Cleanup(func() { e.exec("DROP TABLE orders, deletes; DROP FUNCTION log_deletes, wait_for_test") })
	lock := e.block()
	tbl := e.table(opts...)
	r := start(t, tbl, batch.WithMaxBatchSize(1000))

	victim := orders(2500)
	victim[1500].Note = "block" // sub-batch 2 waits for the test's lock
	r.send("VICTIM", victim)
	lock.waiter()
	cl.Restart(t)
	lock.lost()
	o := r.await("VICTIM")
	require.Equal(t, batch.Failed, o.Status)
	require.Equal(t, 2, o.Seq)
	var pe *batch.ProcessError
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, 2, pe.Seq)
	require.NoError(t, o.CleanupErr, "the cleanup tried again until the server was back")
	require.Zero(t, e.rows("VICTIM"), "nothing of the failed batch is left")
	require.Equal(t, int64(1000), e.deleted("VICTIM"), "the cleanup removed sub-batch 1; the restart rolled back sub-batch 2")

	// The pool's idle connections died with the server; a batch that
	// drew one would fail, as a terminated backend's does (above).
	// database/sql checks those idle for over a second before lending
	// them, which a restart usually outlasts: drop them, for the test
	// not to depend on how long the restart took.
	e.SQL.SetMaxIdleConns(0)
	e.SQL.SetMaxIdleConns(batch.DefaultWorkers + 2)
	for i := range 4 {
		r.send(fmt.Sprintf("AFTER-%d", i), orders(2100))
	}
	r.shutdown()
	for i := range 4 {
		id := fmt.Sprintf("AFTER-%d", i)
		require.Equal(t, batch.Completed, r.outcome(id).Status)
		require.Equal(t, int64(2100), e.rows(id))
	}
}

// A cleanup that meets a statement timeout gives up at once: run again in
// full, the same DELETE would most likely time out again.
func TestCleanupDoesNotRetryATimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`
CREATE SEQUENCE tries;
CREATE FUNCTION time_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('tries'); -- not rolled back with the statement
	RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
END $$;
CREATE TRIGGER time_out BEFORE DELETE ON orders FOR EACH ROW EXECUTE FUNCTION time_out();`)
	tbl := e.table()
	r := start(t, tbl)
	r.send("SLOW", orders(10))
	r.shutdown()
	err := tbl.Cleanup(t.Context(), "SLOW", 1)
	var pg *pgconn.PgError
	require.ErrorAs(t, err, &pg)
	require.Equal(t, "57014", pg.Code)
	require.Equal(t, int64(1), e.Count(t, "SELECT last_value FROM tries"), "one try")
	require.Equal(t, int64(10), e.rows("SLOW"))
}

// A cleanup whose server stays away tries again until its context ends,
// and then says both why it failed and that it gave up.
func TestCleanupGivesUpWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every connection is refused.
	db, err := gorm.Open(postgres.Open("postgres://postgres@127.0.0.1:1/none?sslmode=disable"),
		&gorm.Config{Logger: logger.Discard, DisableAutomaticPing: true})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	tbl, err := gormbatch.New[Order](db)
	require.NoError(t, err)
	// Long enough for a loaded machine to finish its first refused dial:
	// the error must carry why the tries failed, not only that time ran out.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err = tbl.Cleanup(ctx, "GONE", 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var ce *pgconn.ConnectError
	require.ErrorAs(t, err, &ce)
	require.ErrorContains(t, err, `gormbatch: delete batch "GONE" from orders`)
}
