package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The client's management of single jobs runs inside a transaction of the
// caller's, tx, holding the job's row lock from LockStatus on.

// LockStatus locks job id's row and returns its status; found is false if
// there is no such job.
func (*postgres) LockStatus(tx *gorm.DB, id int64) (status string, found bool, err error) {
	err = tx.Raw("SELECT status FROM sheaf_jobs WHERE id = ? FOR UPDATE", id).Row().Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return status, err == nil, err
}

// Attempts returns job id's attempts so far and its allowance.
func (*postgres) Attempts(tx *gorm.DB, id int64) (attempts, max int, err error) {
	err = tx.Raw("SELECT attempts, max_attempts FROM sheaf_jobs WHERE id = ?", id).Row().Scan(&attempts, &max)
	return attempts, max, err
}

// CancelJobs cancels the first limit QUEUED or PROCESSING jobs f selects,
// locking them in ID order, records the attempts of those that were
// running, tells their runners, and returns the IDs it cancelled.
func (*postgres) CancelJobs(tx *gorm.DB, f Filter, limit int) ([]int64, error) {
	f.Newest = false
	sub := f.apply(tx.Session(&gorm.Session{NewDB: true}).Table(JobsTable).
		Select("id, status AS was, claims, locked_by, started_at").Where("status IN ('QUEUED', 'PROCESSING')"), pgTime).
		Order("id").Limit(limit).Clauses(clause.Locking{Strength: "UPDATE"})
	rows, err := tx.Raw(`WITH c AS (?), cancelled AS (
		UPDATE sheaf_jobs j SET status = 'CANCELLED', completed_at = now(), locked_until = NULL, locked_by = NULL
		FROM c WHERE j.id = c.id
	), `+recordAttempts(`SELECT id, claims, locked_by, started_at, 'cancelled', NULL::text FROM c WHERE was = 'PROCESSING'`)+`,
	notified AS (
		SELECT count(pg_notify('`+CancelChannel+`', current_schema() || ':' || id)) FROM c WHERE was = 'PROCESSING'
	)
	SELECT c.id FROM c, notified ORDER BY c.id`, sub).Rows()
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// recordAttempts returns CTEs that record the attempts that sel yields
// (job_id, claim, runner, started_at, outcome, error) in the history, and
// drop the job's attempts that fall out of it.
func recordAttempts(sel string) string {
	return `attempt (job_id, claim, runner, started_at, outcome, error) AS (` + sel + `),
	recorded AS (
		INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, outcome, error) SELECT * FROM attempt
		ON CONFLICT (job_id, claim) DO NOTHING
	), dropped AS (
		DELETE FROM sheaf_attempts a USING attempt
		WHERE a.job_id = attempt.job_id AND a.claim <= attempt.claim - ` + fmt.Sprint(KeptAttempts) + `
	)`
}

// restartSQL gives a failed or cancelled job a new start, due now, with as
// many attempts again as it had. A job that never ran (cancelled while
// queued) keeps its allowance.
const restartSQL = `UPDATE sheaf_jobs SET status = 'QUEUED',
	max_attempts = CASE WHEN attempts = 0 THEN max_attempts ELSE attempts + max_attempts END,
	run_at = now(), started_at = NULL, completed_at = NULL, locked_until = NULL, locked_by = NULL, processed = 0`

// restart runs restartSQL on the jobs where selects, clears the counts of
// their runs (see sheaf_runs), and returns how many jobs it restarted. The
// runs' rows are updated whether they have counts or not: the update waits
// for a roll-up counting the run at the same moment, and so clears what it
// wrote.
func restart(tx *gorm.DB, where string, args ...any) (int64, error) {
	var n int64
	err := tx.Raw(`WITH restarted AS (`+restartSQL+` WHERE `+where+` RETURNING run_id), reopened AS (
	UPDATE sheaf_runs SET counts = NULL WHERE run_id IN (SELECT run_id FROM restarted WHERE run_id IS NOT NULL)
) SELECT count(*) FROM restarted`, args...).Scan(&n).Error
	return n, err
}

// Retry gives job id a new start and tells the runners.
func (*postgres) Retry(tx *gorm.DB, id int64) error {
	if _, err := restart(tx, "id = ?", id); err != nil {
		return err
	}
	return tx.Exec(notifyDue("(SELECT * FROM sheaf_jobs WHERE id = ?) retried"), id).Error
}

func (*postgres) RunNow(tx *gorm.DB, id int64) error {
	err := tx.Exec("UPDATE sheaf_jobs SET run_at = now() WHERE id = ? AND status = 'QUEUED' AND run_at > now()", id).Error
	if err != nil {
		return err
	}
	return tx.Exec(notifyDue("(SELECT * FROM sheaf_jobs WHERE id = ?) hurried"), id).Error
}

// RetryFailed gives every FAILED job among the IDs that sub selects, and
// whose attempts with a new allowance stay below maxTotal, a new start,
// tells the runners, and returns how many it requeued.
func (*postgres) RetryFailed(tx *gorm.DB, f Filter, maxTotal int) (int64, error) {
	sub := f.apply(tx.Session(&gorm.Session{NewDB: true}).Table(JobsTable).Select("id").Where("status = 'FAILED'"), pgTime)
	n, err := restart(tx, "id IN (?) AND status = 'FAILED' AND attempts + max_attempts < ?", sub, maxTotal)
	if err != nil || n == 0 {
		return n, err
	}
	return n, tx.Exec(notifyDue("(SELECT * FROM sheaf_jobs WHERE status = 'QUEUED' AND run_at <= now()) requeued")).Error
}

// KindCount is how many jobs of a kind have a status.
type KindCount struct {
	Kind, Status string
	N            int64
}

// Ready counts the QUEUED jobs due now, and how long the longest-waiting
// one has waited.
func (*postgres) Ready(ctx context.Context, db *gorm.DB) (n int64, oldest time.Duration, err error) {
	var secs float64
	err = db.WithContext(ctx).Raw(`SELECT count(*), coalesce(extract(epoch FROM now() - min(run_at)), 0)
		FROM sheaf_jobs WHERE `+queuedStatus+` AND run_at <= now()`).Row().Scan(&n, &secs)
	return n, time.Duration(secs * float64(time.Second)), err
}
