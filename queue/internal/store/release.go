package store

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"gorm.io/gorm"
)

// Dependency release runs in one transaction with the parent's completion:
// CompleteTx, then for each rule LockGroup and PeriodParents, then
// InsertChild.

// CompleteTx completes the attempt of claim claims of job id inside tx (the
// runner's, for a parent; the handler's, for Job.CompleteTx) and returns the
// job's period and run ID; completed is false if the claim no longer holds
// the job. Like completeSQL it keeps locked_by, naming the runner that
// completed the job. completed_at is the statement's time, not the
// transaction's start: a handler's transaction may have begun long before.
func (*postgres) CompleteTx(tx *gorm.DB, id int64, claims int) (period, runID sql.NullString, completed bool, err error) {
	err = tx.Raw(`UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = statement_timestamp(), locked_until = NULL,
		rescues = 0 WHERE id = @id AND claims = @claims AND status = 'PROCESSING' RETURNING period, run_id`,
		sql.Named("id", id), sql.Named("claims", claims)).Row().Scan(&period, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return period, runID, false, nil
	}
	return period, runID, err == nil, err
}

// StateIn reads job id's status and claim number as tx sees them.
func (*postgres) StateIn(tx *gorm.DB, id int64) (status string, claims int, err error) {
	return stateIn(tx, id)
}

func stateIn(tx *gorm.DB, id int64) (status string, claims int, err error) {
	err = tx.Raw("SELECT status, claims FROM sheaf_jobs WHERE id = ?", id).Row().Scan(&status, &claims)
	return status, claims, err
}

// LockGroup takes the transaction-level lock of a rule's group of parents,
// named by key: parents that complete at once on different runners meet
// here, and the last to arrive sees the others' completions.
func (*postgres) LockGroup(tx *gorm.DB, key string) error {
	return tx.Exec("SELECT pg_advisory_xact_lock(hashtext(?))", key).Error
}

// Parent is a job of a period that a many-to-one rule waits for.
type Parent struct {
	ID           int64
	Kind, Status string
	RunID        *string
}

// PeriodParents returns the jobs of period of the given kinds, in ID order.
func (*postgres) PeriodParents(tx *gorm.DB, period string, kinds []string) ([]Parent, error) {
	return periodParents(tx, period, kinds)
}

func periodParents(tx *gorm.DB, period string, kinds []string) ([]Parent, error) {
	var out []Parent
	err := tx.Raw(`SELECT id, kind, status, run_id FROM sheaf_jobs WHERE period = ? AND kind IN ? ORDER BY id`, period, kinds).
		Scan(&out).Error
	return out, err
}

func (*postgres) TypicalDuration(ctx context.Context, db *gorm.DB, kind string, before time.Time, history int) (b Baseline, ok bool, err error) {
	var p50, p95 *float64
	err = db.WithContext(ctx).Raw(`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d), percentile_cont(0.95) WITHIN GROUP (ORDER BY d),
		count(*) FROM (
		SELECT extract(epoch FROM completed_at - started_at) AS d FROM sheaf_jobs
		WHERE kind = ? AND status = 'COMPLETED' AND started_at IS NOT NULL AND completed_at < ?
		ORDER BY completed_at DESC LIMIT ?) h`, kind, before, history).Row().Scan(&p50, &p95, &b.Jobs)
	if err != nil || p50 == nil {
		return Baseline{}, false, err
	}
	// To the microsecond, the run times' own precision.
	secs := func(s float64) time.Duration { return time.Duration(math.Round(s*1e6)) * time.Microsecond }
	b.Median, b.P95 = secs(*p50), secs(*p95)
	return b, true, nil
}
