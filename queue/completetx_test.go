package queue_test

// Completing a job in its handler's transaction (Job.CompleteTx): the job
// is COMPLETED exactly when the handler's rows are written.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// txJob's handler is the test's.
type txJob struct{}

func (txJob) Kind() string { return "tx_job" }

// txWork is a txJob handler's work: db is the env's database.
type txWork func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error

// completeAndHold is a txWork that writes its ledger row and completes its
// job in one transaction, then closes inTx and holds the transaction open
// until release is closed, without watching its context. The transaction
// is begun on the job's context if withCtx, as a careful handler does, or
// without it, as ordinary gorm code does.
func completeAndHold(inTx, release chan struct{}, withCtx bool) txWork {
	return func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
		if withCtx {
			db = db.WithContext(ctx)
		}
		return db.Transaction(func(tx *gorm.DB) error {
			if err := writeLedger(tx, j); err != nil {
				return err
			}
			if err := j.CompleteTx(ctx, tx); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}
}

// txEnv is an env with a ledger table and a txJob handler that calls work,
// for attempts of up to two, retried at once.
func txEnv(t *testing.T, work txWork) *env {
	t.Helper()
	var db *gorm.DB // set before any runner starts
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[txJob](func(ctx context.Context, j *queue.Job[txJob]) error {
			return work(ctx, db, j)
		}), queue.MaxAttempts(2), queue.RetryBackoff(queue.Delays{0})))
	})
	db = e.db.Gorm
	require.NoError(t, db.Exec(`CREATE TABLE ledger (job_id bigint NOT NULL, attempt int NOT NULL)`).Error)
	return e
}

// writeLedger writes j's row in the ledger, in tx.
func writeLedger(tx *gorm.DB, j *queue.Job[txJob]) error {
	return tx.Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error
}

// commitWithLedger writes j's row and completes j in one transaction.
func commitWithLedger(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := writeLedger(tx, j); err != nil {
			return err
		}
		return j.CompleteTx(ctx, tx)
	})
}

// ledger returns the attempts of job id that the ledger holds.
func (e *env) ledger(t *testing.T, id int64) []int {
	t.Helper()
	var attempts []int
	require.NoError(t, e.db.Gorm.Raw("SELECT attempt FROM ledger WHERE job_id = ? ORDER BY attempt", id).Scan(&attempts).Error)
	return attempts
}

// The job is completed by the handler's commit, with its row, once: the
// runner reports it completed and does not write it again (nothing
// rejected). Whatever the first attempt's transaction did short of
// committing (rolled back by an error, rolled back by the handler, which
// then returns nil, or left open) leaves neither row nor completion, and
// the job runs again; a handler that fails after its commit leaves both.
func TestCompleteTxCommitsWithTheHandlersRows(t *testing.T) {
	t.Parallel()
	begin := func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) *gorm.DB {
		tx := db.WithContext(ctx).Begin()
		require.NoError(t, tx.Error)
		require.NoError(t, writeLedger(tx, j))
		require.NoError(t, j.CompleteTx(ctx, tx))
		return tx
	}
	for _, tc := range []struct {
		name  string
		first txWork
		// The outcome: the attempt that completed the job, and the first
		// attempt's error ("" if it completed) and its log message.
		attempts int
		lastErr  string
		logged   string
	}{
		{name: "committed", first: commitWithLedger, attempts: 1},
		{name: "failed after the commit", attempts: 1,
			first: func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
				require.NoError(t, commitWithLedger(ctx, db, j))
				// Completed already: not this attempt's to complete again.
				require.ErrorIs(t, db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return j.CompleteTx(ctx, tx) }),
					queue.ErrLeaseLost)
				return errors.New("failed late")
			},
			logged: "queue: handler returned an error after the transaction of its CompleteTx committed; the job stays completed"},
		{name: "rolled back by its error", attempts: 2, lastErr: "boom",
			first: func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
				return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					require.NoError(t, writeLedger(tx, j))
					require.NoError(t, j.CompleteTx(ctx, tx))
					return errors.New("boom")
				})
			}},
		{name: "rolled back, nil returned", attempts: 2, lastErr: "did not commit",
			first: func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
				require.NoError(t, begin(ctx, db, j).Rollback().Error)
				return nil
			}},
		{name: "left open", attempts: 2, lastErr: "did not commit",
			first: func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
				begin(ctx, db, j)
				return nil
			},
			logged: "queue: handler returned with the transaction of its CompleteTx still open; rolled it back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := txEnv(t, func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
				if j.Attempt == 1 {
					return tc.first(ctx, db, j)
				}
				return commitWithLedger(ctx, db, j)
			})
			id := enqueue(t, e, txJob{})
			logs := newLogs(slog.LevelWarn)
			var mu sync.Mutex
			var ends []queue.EventType // as the Attempt hooks hear of each attempt's end
			hooks := queue.WithHooks(queue.Hooks{Attempt: func(ctx context.Context, _ *queue.JobRecord) (context.Context, func(queue.Event)) {
				return ctx, func(ev queue.Event) {
					mu.Lock()
					defer mu.Unlock()
					ends = append(ends, ev.Type)
				}
			}})
			r := e.runner(t, logs.option(), hooks)
			recs, err := e.client.Wait(context.Background(), id)
			require.NoError(t, err)
			rec := recs[0]
			require.Equal(t, queue.StatusCompleted, rec.Status)
			require.Equal(t, tc.attempts, rec.Attempts)
			require.Equal(t, []int{tc.attempts}, e.ledger(t, id), "one row, written by the attempt that completed the job")
			if tc.lastErr == "" {
				require.Nil(t, rec.LastError)
			} else {
				require.Contains(t, *rec.LastError, tc.lastErr)
			}
			require.NotNil(t, rec.LockedBy, "the completing runner is named, as the runner's own completion names it")
			e.events.Wait(t, queue.EventCompleted, id, 1)
			require.NotContains(t, e.events.Of(id), queue.EventRejected)
			st := r.Stats()
			require.Equal(t, int64(1), st.Completed)
			require.Zero(t, st.Rejected)
			require.Equal(t, int64(tc.attempts-1), st.Retried)
			if tc.logged != "" {
				logs.wait(t, tc.logged, 1)
			}
			want := []queue.EventType{queue.EventCompleted}
			if tc.attempts == 2 {
				want = []queue.EventType{queue.EventRetrying, queue.EventCompleted}
			}
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, want, ends)
		})
	}
}

// A handler whose job is no longer its attempt's (here: claimed again, as
// after a rescue) gets ErrLeaseLost from CompleteTx, and rolls its rows
// back; the job's row is left to the later claim (of another runner, so
// that this one does not put it back as an orphan of its own).
func TestCompleteTxOfAStaleClaim(t *testing.T) {
	t.Parallel()
	proceed := make(chan struct{})
	got := make(chan error, 1)
	e := txEnv(t, func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
		<-proceed
		// The test's claim is not one the runner knows of: a renewal could
		// cancel ctx first, and the statements fail for that instead.
		ctx = context.WithoutCancel(ctx)
		err := commitWithLedger(ctx, db, j)
		got <- err
		return err
	})
	id := enqueue(t, e, txJob{})
	r := e.runner(t)
	e.events.Wait(t, queue.EventStarted, id, 1)
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET claims = claims + 1, locked_by = 'another-runner' WHERE id = ?", id).Error)
	close(proceed)
	err := <-got
	require.ErrorIs(t, err, queue.ErrLeaseLost)
	e.events.Wait(t, queue.EventRejected, id, 1)
	require.Empty(t, e.ledger(t, id), "the handler rolled its row back")
	require.Equal(t, queue.StatusProcessing, e.status(t, id), "left to the later claim")
	require.Equal(t, int64(1), r.Stats().Rejected)
	require.Zero(t, r.Stats().Completed)
}

// A parent completed in its handler's transaction releases its children in
// that transaction.
func TestCompleteTxReleasesDependants(t *testing.T) {
	t.Parallel()
	e := ledgerEnv(t)
	res, err := e.client.Enqueue(context.Background(), txLedgerJob{})
	require.NoError(t, err)
	e.runner(t)
	ev := e.events.Wait(t, queue.EventReleased, 0, 1)[0]
	require.Equal(t, "tx-child", ev.Rule)
	require.Equal(t, []int64{res.Job.ID}, ev.ParentIDs)
	recs, err := e.client.Wait(context.Background(), res.Job.ID, ev.JobID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, recs[0].Status)
	require.Equal(t, queue.StatusCompleted, recs[1].Status)
	require.Equal(t, "tx_child", recs[1].Kind)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM ledger WHERE job_id = ?", res.Job.ID))
}

// CompleteTx refuses, with ErrInvalidOption and without completing the job,
// what is not a transaction on the queue's database. A completion in a
// savepoint that rolls back goes with it; called twice in one transaction,
// CompleteTx completes the job once.
func TestCompleteTxRefusesMisuse(t *testing.T) {
	t.Parallel()
	// A database of the other kind than the run's store.
	otherKind := func(t *testing.T) *pgtest.DB {
		if pgtest.Store() == "postgres" {
			return pgtest.NewSQLite(t)
		}
		if err := pgtest.Reachable(); err != nil {
			return nil
		}
		return pgtest.New(t)
	}(t)
	// Another database of the same kind, with the queue's tables.
	sameKind := pgtest.NewDB(t)
	other, err := queue.NewClient(sameKind.Gorm, queue.NewRegistry(), quiet())
	require.NoError(t, err)
	require.NoError(t, other.Migrate(context.Background()))

	errRollback := errors.New("roll back")
	inTx := func(ctx context.Context, db *gorm.DB, f func(tx *gorm.DB) error) error {
		var err error
		txErr := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			err = f(tx)
			return errRollback
		})
		require.ErrorIs(t, txErr, errRollback)
		return err
	}
	type refusal struct {
		name string
		err  error
	}
	refusals := make(chan refusal, 10)
	e := txEnv(t, func(ctx context.Context, db *gorm.DB, j *queue.Job[txJob]) error {
		refusals <- refusal{"nil", j.CompleteTx(ctx, nil)}
		refusals <- refusal{"not a transaction", j.CompleteTx(ctx, db)}
		refusals <- refusal{"another database", inTx(ctx, sameKind.Gorm, func(tx *gorm.DB) error { return j.CompleteTx(ctx, tx) })}
		if otherKind != nil {
			refusals <- refusal{"another kind of database", inTx(ctx, otherKind.Gorm, func(tx *gorm.DB) error { return j.CompleteTx(ctx, tx) })}
		}
		close(refusals)
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := writeLedger(tx, j); err != nil {
				return err
			}
			// In a savepoint that rolls back, the completion goes with it.
			require.ErrorIs(t, tx.Transaction(func(sp *gorm.DB) error {
				require.NoError(t, j.CompleteTx(ctx, sp))
				return errRollback
			}), errRollback)
			if err := j.CompleteTx(ctx, tx); err != nil {
				return err
			}
			return j.CompleteTx(ctx, tx) // again: nothing more to do
		})
	})
	id := enqueue(t, e, txJob{})
	e.runner(t)
	recs, err := e.client.Wait(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, recs[0].Status)
	require.Equal(t, 1, recs[0].Attempts, "no refusal completed the job or failed the attempt")
	require.Equal(t, []int{1}, e.ledger(t, id))
	n := 0
	for r := range refusals {
		n++
		require.ErrorIs(t, r.err, queue.ErrInvalidOption, r.name)
		require.ErrorContains(t, r.err, fmt.Sprintf("CompleteTx of job %d", id), r.name)
	}
	require.GreaterOrEqual(t, n, 3)
	require.Zero(t, sameKind.Count(t, "SELECT count(*) FROM sheaf_jobs"))

	// A Job built by hand, as in a handler's unit test, has nothing to complete.
	require.NoError(t, (&queue.Job[txJob]{}).CompleteTx(context.Background(), nil))
}

// oneChunk is a Chunked handler of one record that tries CompleteTx in its
// chunk.
type oneChunk struct {
	db  *gorm.DB
	got chan error
}

func (oneChunk) Records(context.Context, *queue.Job[txJob]) (int64, iter.Seq2[int, error], error) {
	return 1, func(yield func(int, error) bool) { yield(1, nil) }, nil
}

func (c oneChunk) ProcessChunk(ctx context.Context, j *queue.Job[txJob], _ batch.Batch[int]) error {
	return c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		c.got <- j.CompleteTx(ctx, tx)
		return nil
	})
}

func (oneChunk) Cleanup(context.Context, *queue.Job[txJob]) error { return nil }

// A chunked job completes after its last chunk: CompleteTx refuses it.
func TestCompleteTxRefusesChunkedJobs(t *testing.T) {
	t.Parallel()
	h := oneChunk{got: make(chan error, 1)}
	e := newEnv(t, func(r *queue.Registry) { require.NoError(t, queue.RegisterChunked[txJob, int](r, &h)) })
	h.db = e.db.Gorm
	id := enqueue(t, e, txJob{})
	e.runner(t)
	err := <-h.got
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.ErrorContains(t, err, "chunked")
	e.waitStatus(t, id, queue.StatusCompleted) // by the runner, after its chunk
}

// A runner process that dies while its handler completes a job in its
// transaction leaves the handler's row and the job's completion (with the
// child it releases) both or neither: neither when it dies before the
// commit, both when it dies right after. Rescued, the job runs to exactly
// one row.
func TestCompleteTxSurvivesACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		crash     string
		committed bool
	}{{"before-commit", false}, {"after-commit", true}} {
		t.Run(tc.crash, func(t *testing.T) {
			t.Parallel()
			e := ledgerEnv(t)
			res, err := e.client.Enqueue(context.Background(), txLedgerJob{Crash: tc.crash})
			require.NoError(t, err)
			id := res.Job.ID
			runner := "crashing-" + tc.crash
			c := startChild(t, e.db.DSN, runner, 30*time.Second, nil)
			<-c.exited()
			require.False(t, c.cmd.ProcessState.Success(), "the child killed itself")

			rows := func() int64 { return e.db.Count(t, "SELECT count(*) FROM ledger WHERE job_id = ?", id) }
			children := func() int64 { return e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'tx_child'") }
			st := e.status(t, id)
			require.Equal(t, tc.committed, st == queue.StatusCompleted, "status %s", st)
			require.Equal(t, st == queue.StatusCompleted, rows() == 1, "the row exists exactly when the job is COMPLETED")
			require.Equal(t, rows(), children(), "the child is released exactly when its parent completes")
			if !tc.committed {
				require.Equal(t, queue.StatusProcessing, st, "left under the dead runner")
				require.Zero(t, rows())
			}

			e.expireRunner(t, runner)
			e.runner(t, queue.WithRescueInterval(10*time.Millisecond))
			if !tc.committed {
				e.events.Wait(t, queue.EventRescued, id, 1)
			}
			e.waitStatus(t, id, queue.StatusCompleted)
			require.Equal(t, int64(1), rows(), "worked to exactly one row")
			require.Equal(t, int64(1), children(), "one child, released once")
		})
	}
}

// holdJob's handler holds its job until the test lets it go.
type holdJob struct{}

func (holdJob) Kind() string { return "hold" }

// A handler's transaction holds its job's row from CompleteTx to its
// commit; the runner's lease renewals pass it by rather than wait for it,
// so the leases of the runner's other jobs are renewed meanwhile, and
// neither job is taken for lost.
func TestCompleteTxDoesNotHoldUpRenewals(t *testing.T) {
	t.Parallel()
	pgtest.RowLocks(t)
	inTx, release := make(chan struct{}), make(chan struct{})
	e := txEnv(t, completeAndHold(inTx, release, true))
	require.NoError(t, queue.Register(e.reg, queue.HandlerFunc[holdJob](func(ctx context.Context, _ *queue.Job[holdJob]) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})))
	var once sync.Once
	defer once.Do(func() { close(release) }) // if the test fails first
	held := enqueue(t, e, holdJob{})
	// A lease a loaded machine renews in time; renewals every 1.7 s. A
	// runner whose renewals waited for the transaction would see the held
	// job rescued as soon as its lease ran out.
	r := e.runner(t, queue.WithLease(5*time.Second), queue.WithRescueInterval(10*time.Millisecond))
	e.events.Wait(t, queue.EventStarted, held, 1)
	id := enqueue(t, e, txJob{})
	<-inTx
	get := func() *queue.JobRecord {
		rec, err := e.client.Get(context.Background(), held)
		require.NoError(t, err)
		return rec
	}
	first := get().LockedUntil
	require.NotNil(t, first)
	// Looking every 5 ms, as waitStatus does, until the lease moves on, in
	// a renewal or in a rescue and claim.
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	rec := get()
	for ; rec.LockedUntil == nil || !rec.LockedUntil.After(*first); rec = get() {
		require.True(t, time.Now().Before(deadline), "the held job's lease was not renewed")
		<-tick.C
	}
	require.Equal(t, 1, rec.Claims, "the held job's lease was renewed; it was not rescued and claimed again")
	require.Zero(t, rec.Rescues)
	once.Do(func() { close(release) })
	recs, err := e.client.Wait(context.Background(), id, held)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCompleted, recs[0].Status)
	require.Equal(t, queue.StatusCompleted, recs[1].Status)
	require.Equal(t, 1, recs[1].Claims, "the held job ran once, never rescued")
	require.NotContains(t, e.events.Of(held), queue.EventRescued)
	require.Zero(t, r.Stats().Rejected)
}
