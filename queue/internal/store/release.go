package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"gorm.io/gorm"
)

// Dependency release runs in one transaction with the parent's completion:
// CompleteParent, then for each rule LockGroup and PeriodParents, then
// InsertChild.

// CompleteParent completes the attempt of claim claims of job id inside tx
// and returns the job's period and run ID; completed is false if the claim
// no longer holds the job.
func CompleteParent(ctx context.Context, tx *sql.Tx, id int64, claims int) (period, runID sql.NullString, completed bool, err error) {
	err = tx.QueryRowContext(ctx, `UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = now(), locked_until = NULL, locked_by = NULL,
		rescues = 0 WHERE id = $1 AND `+attemptGuard+` RETURNING period, run_id`, id, claims).Scan(&period, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return period, runID, false, nil
	}
	return period, runID, err == nil, err
}

// LockGroup takes the transaction-level lock of a rule's group of parents,
// named by key: parents that complete at once on different runners meet
// here, and the last to arrive sees the others' completions.
func LockGroup(ctx context.Context, tx *sql.Tx, key string) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", key)
	return err
}

// Parent is a job of a period that a many-to-one rule waits for.
type Parent struct {
	ID           int64
	Kind, Status string
	RunID        *string
}

// PeriodParents returns the jobs of period of the given kinds, in ID order.
func PeriodParents(ctx context.Context, tx *sql.Tx, period string, kinds []string) ([]Parent, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, kind, status, run_id FROM sheaf_jobs WHERE period = $1 AND kind = ANY($2) ORDER BY id`,
		period, kinds)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Parent
	for rows.Next() {
		var p Parent
		if err := rows.Scan(&p.ID, &p.Kind, &p.Status, &p.RunID); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// TypicalDuration returns the median run time of kind's last history
// completed jobs that finished before before, leaving out the jobs exclude;
// ok is false when there are none.
func TypicalDuration(ctx context.Context, db *gorm.DB, kind string, exclude []int64, before time.Time, history int) (d time.Duration, ok bool, err error) {
	if exclude == nil {
		exclude = []int64{} // NOT id = ANY(NULL) would match nothing
	}
	var secs *float64
	err = db.WithContext(ctx).Raw(`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) FROM (
		SELECT extract(epoch FROM completed_at - started_at) AS d FROM sheaf_jobs
		WHERE kind = ? AND status = 'COMPLETED' AND started_at IS NOT NULL AND NOT id = ANY(?) AND completed_at < ?
		ORDER BY completed_at DESC LIMIT ?) h`, kind, IDListValue(exclude), before, history).Row().Scan(&secs)
	if err != nil || secs == nil {
		return 0, false, err
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}
