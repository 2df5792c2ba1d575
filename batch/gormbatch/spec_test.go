package gormbatch_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
)

// The data-flow examples of the engine's specification (section 10), end to
// end against PostgreSQL, with maxBatchSize 5000 and 4 workers (the defaults).
// "In n transactions" is read back from the rows' xmin.

func TestSpec10_1SimpleBatch(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		r := start(t, e.table(opts...))
		r.send("ORDER-001", orders(100))
		r.shutdown()

		o := r.outcome("ORDER-001")
		require.Equal(t, batch.Completed, o.Status)
		require.Equal(t, 1, o.SubBatches)
		require.Equal(t, int64(100), e.rows("ORDER-001"))
		require.Equal(t, int64(1), e.transactions("ORDER-001"))
	})
}

func TestSpec10_2SplitBatch(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		r := start(t, e.table(opts...))
		r.send("ORDER-002", orders(10_000))
		r.shutdown()

		o := r.outcome("ORDER-002")
		require.Equal(t, batch.Completed, o.Status)
		require.Equal(t, 2, o.SubBatches)
		require.Equal(t, int64(10_000), o.Items)
		require.Equal(t, int64(10_000), e.rows("ORDER-002"))
		require.Equal(t, int64(2), e.transactions("ORDER-002"))
		// Sub-batch 1 holds the first 5000 items, in one transaction.
		require.Equal(t, int64(1), e.Count(t, `SELECT count(DISTINCT xmin::text) FROM orders
			WHERE batch_id = 'ORDER-002' AND line < 5000`))
	})
}

func TestSpec10_3FailureWithCleanup(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		r := start(t, e.table(opts...))
		items := orders(10_000)
		items[7000].Cents = -1 // in sub-batch 2: violates cents_not_negative
		r.send("ORDER-003", items)
		r.shutdown()

		o := r.outcome("ORDER-003")
		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 2, o.Seq)
		require.Equal(t, 1, o.SubBatches, "sub-batch 1 was committed before sub-batch 2 failed")
		require.NoError(t, o.CleanupErr)
		requireConstraintViolation(t, o.Err, 2)

		require.Equal(t, int64(0), e.rows("ORDER-003"), "all-or-nothing")
		require.Equal(t, int64(5000), e.deleted("ORDER-003"), "cleanup deleted sub-batch 1's rows; sub-batch 2 never committed")
	})
}

func TestSpec10_4ParallelBatchIDs(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		r := start(t, e.table(opts...), batch.WithWorkers(4))
		ids := []string{"ORDER-001", "ORDER-002", "ORDER-003"}
		for _, o := range orders(500) { // interleaved, one item per batch in turn
			for _, id := range ids {
				require.NoError(t, r.c.Send(t.Context(), batch.Data(id, o)))
			}
		}
		for _, id := range ids {
			require.NoError(t, r.c.Send(t.Context(), batch.End[Order](id)))
		}
		r.shutdown()

		for _, id := range ids {
			require.Equal(t, batch.Completed, r.outcome(id).Status)
			require.Equal(t, int64(500), e.rows(id))
		}
		require.Equal(t, int64(1500), e.Count(t, "SELECT count(*) FROM orders"))
		require.Equal(t, int64(3), e.Count(t, "SELECT count(DISTINCT xmin::text) FROM orders"), "3 transactions")
	})
}

// A constraint violation in sub-batch 2 of one batch, while other batches run
// alongside: that batch leaves no row, the others all of theirs.
func TestConstraintViolationInSubBatch2(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		r := start(t, e.table(opts...), batch.WithMaxBatchSize(1000))
		bad := orders(3500)
		bad[1500].Cents = -1
		var wg sync.WaitGroup
		for id, items := range map[string][]Order{"GOOD-A": orders(4200), "BAD": bad, "GOOD-B": orders(999)} {
			wg.Go(func() { // concurrent producers, so that the batches interleave
				assert.NoError(t, r.c.SendMany(t.Context(), id, items))
				assert.NoError(t, r.c.Send(t.Context(), batch.End[Order](id)))
			})
		}
		wg.Wait()
		r.shutdown()

		o := r.outcome("BAD")
		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 2, o.Seq)
		requireConstraintViolation(t, o.Err, 2)
		require.Equal(t, int64(0), e.rows("BAD"))
		require.Equal(t, int64(1000), e.deleted("BAD"))
		require.Equal(t, int64(4200), e.rows("GOOD-A"))
		require.Equal(t, int64(999), e.rows("GOOD-B"))
		require.Equal(t, batch.Completed, r.outcome("GOOD-A").Status)
		require.Equal(t, batch.Completed, r.outcome("GOOD-B").Status)
		s := r.c.Stats()
		require.Equal(t, s.ItemsReceived, s.ItemsProcessed+s.ItemsDiscarded)
	})
}

// requireConstraintViolation checks that err is the engine's error for
// sub-batch seq, names the table, and carries PostgreSQL's check_violation.
func requireConstraintViolation(t *testing.T, err error, seq int) {
	t.Helper()
	var pe *batch.ProcessError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "process", pe.Op)
	require.Equal(t, seq, pe.Seq)
	require.ErrorContains(t, err, "into orders")
	var pg *pgconn.PgError
	require.True(t, errors.As(err, &pg), "the PostgreSQL error is reachable: %v", err)
	require.Equal(t, "23514", pg.Code)
	require.Equal(t, "cents_not_negative", pg.ConstraintName)
}
