package enqueue

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Insert inserts rows on db in one statement, and calls set with each
// row's record of type R, and whether it is an existing job that held the
// row's idempotency key; key reads a record's key.
func Insert[R any](ctx context.Context, st store.Store, db *gorm.DB, rows []store.NewJob, key func(*R) *string, set func(i int, r *R, dup bool)) error {
	var inserted []R
	if err := st.Insert(ctx, db, rows, &inserted); err != nil {
		return check.Failed(ctx, "enqueue", err)
	}
	err := Match(rows, inserted, key, func(keys []string) (existing []R, err error) {
		return existing, st.Jobs(ctx, db, store.Filter{IdempotencyKeys: keys}, 0, &existing)
	}, set)
	return check.Failed(ctx, "enqueue", err)
}

// AnalyzeAfter is the bulk size from which Bulk refreshes the table's
// statistics. Autovacuum would too, but up to a minute later; until then
// the planner, believing the table small, may sort every queued job on
// each claim instead of walking the claim index.
const AnalyzeAfter = 10_000

// Bulk stores rows with the store's Copy and returns how many jobs it
// created. Rows with idempotency keys cannot be copied (COPY cannot skip
// duplicates), and neither can rows for a caller's transaction (inTx: COPY
// needs a connection of its own): then insert stores them in slices of
// 5,000, in one transaction (a savepoint inside the caller's) so that a
// failure in a late slice leaves none stored.
func Bulk(ctx context.Context, st store.Store, db *gorm.DB, rows []store.NewJob, inTx bool, log *slog.Logger,
	insert func(tx *gorm.DB, part []store.NewJob) (created int64, err error)) (int64, error) {
	if inTx || slices.ContainsFunc(rows, func(r store.NewJob) bool { return r.Key != nil }) {
		var n int64
		err := st.Tx(ctx, db, func(tx *gorm.DB) error {
			for part := range slices.Chunk(rows, 5000) {
				created, err := insert(tx, part)
				n += created
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	return Copy(ctx, st, len(rows), func(i int) (store.NewJob, error) { return rows[i], nil }, log)
}

// ErrKeyed is the error a row function given to Copy returns for a job
// with an idempotency key, which Copy cannot store.
var ErrKeyed = errors.New("a job with an idempotency key")

// Copy stores the n jobs row gives with the store's CopyRows, which on
// PostgreSQL asks for each job as it sends the ones before it: a caller
// that prepares the jobs in row has them prepared while the server stores
// them. An error of row stops the copy, nothing is stored, and Copy
// returns it as it is (ErrKeyed among them); the store's errors are
// checked as the queue's are.
func Copy(ctx context.Context, st store.Store, n int, row func(i int) (store.NewJob, error), log *slog.Logger) (int64, error) {
	var rowErr error
	n64, err := st.CopyRows(ctx, n, func(i int) (store.NewJob, error) {
		r, err := row(i)
		if err == nil && r.Key != nil {
			err = ErrKeyed
		}
		rowErr = err
		return r, err
	})
	if rowErr != nil {
		return 0, rowErr
	}
	if err != nil {
		return 0, check.Failed(ctx, "enqueue bulk", err)
	}
	if n64 >= AnalyzeAfter {
		if err := st.Analyze(ctx); err != nil {
			log.Warn("queue: analyze after bulk enqueue failed", "err", err)
		}
	}
	return n64, nil
}
