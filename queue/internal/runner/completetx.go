package runner

// Completing in the handler's transaction (Job.CompleteTx): the job's
// completion commits, or rolls back, with the handler's own rows.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// txCompletion is a completion that a handler wrote in its transaction:
// whether it committed is known only once the handler has returned.
type txCompletion struct {
	tx       gorm.TxCommitter // the transaction's connection, as gorm holds it
	released []Released       // the children the completion releases
}

// errNotCommitted is the error of an attempt whose handler returned nil
// after CompleteTx, but whose transaction did not commit: the handler's
// rows were not written, so the job is not complete.
var errNotCommitted = errors.New("queue: the handler returned nil, but the transaction in which it called CompleteTx did not commit")

// CompleteTx completes the job inside tx, a transaction of the handler's
// on the queue's database, and releases its children in tx (see
// queue.Job.CompleteTx). It returns an error wrapping Errors.LeaseLost if
// the job is no longer the attempt's, and one wrapping Errors.Invalid for a
// tx it cannot complete the job in.
func (ex *Execution) CompleteTx(ctx context.Context, tx *gorm.DB) error {
	r, id := ex.r, ex.row.ID
	if ex.kind != nil && ex.kind.Chunked {
		return r.invalid("CompleteTx of job %d: a chunked job completes after its last chunk, not in a transaction of its handler's", id)
	}
	if tx == nil {
		return r.invalid("CompleteTx of job %d: nil transaction", id)
	}
	conn, ok := tx.Statement.ConnPool.(gorm.TxCommitter)
	if !ok {
		// Outside a transaction the completion would commit at once,
		// whatever became of the handler's rows.
		return r.invalid("CompleteTx of job %d: the *gorm.DB is not in a transaction; begin one (db.Transaction) and write the handler's rows in it", id)
	}
	if d := tx.Dialector.Name(); d != r.st.Dialect() {
		return r.invalid("CompleteTx of job %d: a %s transaction, but the queue is on %s", id, d, r.st.Dialect())
	}
	tx = tx.WithContext(ctx)
	// Recorded before the completion runs, which locks the job's row (on
	// SQLite, the database's write lock) in tx until tx ends, and kept if
	// it fails: a stop out of time rolls tx back (see cutRunning) rather
	// than wait for a handler that may never end it.
	r.mu.Lock()
	ex.txs = append(ex.txs, conn)
	r.mu.Unlock()
	accepted, released, err := r.completeIn(tx, ex, r.cfg.Rules.For(ex.row.Kind))
	if err != nil {
		return fmt.Errorf("queue: complete job %d: %w", id, err)
	}
	if !accepted {
		return ex.notCompleted(ctx, tx)
	}
	// A later call in another transaction (the handler tries its
	// transaction again, after this one rolled back) replaces this one.
	r.mu.Lock()
	ex.inTx = &txCompletion{tx: conn, released: released}
	r.mu.Unlock()
	return nil
}

// notCompleted is what a CompleteTx whose guarded completion changed
// nothing returns. Usually the job is no longer this attempt's:
// Errors.LeaseLost. But while the queue's database still has it as this
// attempt's, either tx completed it already (CompleteTx called twice in
// it): nil; or tx is on another database, which does not see the job so.
func (ex *Execution) notCompleted(ctx context.Context, tx *gorm.DB) error {
	id := ex.row.ID
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ex.r.timeouts.statement)
	defer cancel()
	st, claims, err := ex.now(qctx)
	if err != nil {
		return fmt.Errorf("queue: complete job %d: the completion changed nothing, and reading the job failed: %w", id, err)
	}
	if st != statusProcessing || claims != ex.row.Claims {
		return fmt.Errorf("%w: job %d", ex.r.cfg.Errors.LeaseLost, id)
	}
	txSt, txClaims, err := ex.r.st.StateIn(tx, id)
	if err == nil && txSt == statusCompleted && txClaims == ex.row.Claims {
		return nil
	}
	return ex.r.invalid("CompleteTx of job %d: the transaction does not see the job as the queue's database holds it; "+
		"begin it on the queue's database", id)
}

// settleTx finds out, once the handler has returned, whether the
// transaction in which it called CompleteTx committed. The database
// decides, not the handler's error: a job that is COMPLETED by this claim
// was completed by that transaction, since nothing else completes a claim
// before the handler returns. If it did not commit, the attempt goes on
// as one that failed with err, or with errNotCommitted if err is nil: the
// handler's rows were not written, so the job runs again rather than
// completing without them. A read that fails leaves it at that too; if the
// transaction did commit, the failure's guarded write then changes nothing
// and the result is reported as rejected.
func (r *Runner) settleTx(ex *Execution, c *txCompletion, err error) (committed bool, _ error) {
	orNotCommitted := func(err error) error {
		if err == nil {
			return errNotCommitted
		}
		return err
	}
	// A transaction that the handler left open would hold the job's row
	// and a connection until the process ends: end it, uncommitted.
	// Rolling back a transaction that has ended changes nothing.
	if c.tx.Rollback() == nil {
		r.jobLogger(&ex.row).Error("queue: handler returned with the transaction of its CompleteTx still open; rolled it back")
		return false, orNotCommitted(err)
	}
	var st string
	var claims int
	readErr := r.retry(func(ctx context.Context, _ int) (err error) {
		st, claims, err = ex.now(ctx)
		return err
	})
	if readErr != nil {
		r.jobLogger(&ex.row).Error("queue: could not read whether the transaction of CompleteTx committed; finishing the attempt as failed",
			"err", readErr)
		return false, orNotCommitted(err)
	}
	if st == statusCompleted && claims == ex.row.Claims {
		return true, err
	}
	return false, orNotCommitted(err)
}

// completedInTx reports an attempt whose handler's transaction completed
// its job, as the completer reports one that it completed: nothing is left
// to write.
func (r *Runner) completedInTx(ex *Execution, c *txCompletion, err error, took time.Duration) {
	if err != nil {
		r.jobLogger(&ex.row).Warn("queue: handler returned an error after the transaction of its CompleteTx committed; the job stays completed",
			"err", err)
	}
	res := result{ex: ex, status: statusCompleted, took: took}
	if ex.end != nil {
		ex.ended(res.event())
	}
	r.announceReleased(ex, c.released)
	r.report(res, true)
	r.unhold(ex)
}

// invalid is an error wrapping Errors.Invalid.
func (r *Runner) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{r.cfg.Errors.Invalid}, args...)...)
}
