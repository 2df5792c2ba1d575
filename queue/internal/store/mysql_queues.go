package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// Queues, runners, the audit log, leadership, roll-ups and activity on
// MariaDB.

func itoa(n int) string { return strconv.Itoa(n) }

func (*mysql) Paused(ctx context.Context, db *gorm.DB) ([]PausedQueue, error) {
	return pausedQueues(ctx, db)
}
func (*mysql) QueueCounts(ctx context.Context, db *gorm.DB, active bool) ([]QueueCount, error) {
	return queueCounts(ctx, db, mysqlNow, active)
}
func (*mysql) History(ctx context.Context, db *gorm.DB, id int64) ([]Attempt, error) {
	return history(ctx, db, id)
}
func (s *mysql) Version(ctx context.Context) (int, error) { return schemaVersion(ctx, s.db) }
func (*mysql) AuditLog(ctx context.Context, db *gorm.DB, before int64, limit int) ([]AuditEntry, error) {
	return auditLog(ctx, db, before, limit)
}

func (s *mysql) Runners(ctx context.Context, within time.Duration) ([]RunnerRow, error) {
	if within <= 0 {
		return runnersSeen(ctx, s.gdb, mysqlNow, "true")
	}
	return runnersSeen(ctx, s.gdb, mysqlNow, "seen_at >= "+mysqlNow+" - INTERVAL ? MICROSECOND", within.Microseconds())
}

// SetPaused tells the runners of this process once db's transaction
// commits (at once outside one); inside a caller's transaction, they find
// the change at their next read of the paused queues, within a poll.
func (s *mysql) SetPaused(ctx context.Context, db *gorm.DB, name string, paused bool) error {
	err := db.WithContext(ctx).Exec(`INSERT INTO sheaf_queues (name, paused_at, updated_at)
		VALUES (?, CASE WHEN ? THEN `+mysqlNow+` END, `+mysqlNow+`)
		ON DUPLICATE KEY UPDATE paused_at = CASE WHEN VALUES(paused_at) IS NULL THEN NULL ELSE coalesce(paused_at, VALUES(paused_at)) END,
			updated_at = VALUES(updated_at)`, name, paused).Error
	if err == nil && !inTx(db) {
		s.hub.publish(QueuesChannel, name)
	}
	return err
}

func (*mysql) RecordAudit(ctx context.Context, db *gorm.DB, e AuditEntry) (id int64, err error) {
	var at any
	if !e.At.IsZero() {
		at = mysqlTime(e.At)
	}
	var target any
	if e.Target != nil {
		target = string(e.Target)
	}
	err = db.WithContext(ctx).Raw(`INSERT INTO sheaf_audit (at, actor, action, target, result, changed)
		VALUES (coalesce(?, `+mysqlNow+`), ?, ?, ?, ?, ?) RETURNING id`,
		at, e.Actor, e.Action, target, e.Result, e.Changed).Row().Scan(&id)
	return id, err
}

func (c mysqlConn) SeeRunner(ctx context.Context, r RunnerRow, starting bool) error {
	if starting {
		if _, err := c.s.db.ExecContext(ctx, "DELETE FROM sheaf_runners WHERE seen_at < "+mysqlNow+" - INTERVAL 1 DAY"); err != nil {
			return err
		}
	}
	_, err := c.s.db.ExecContext(ctx, `INSERT INTO sheaf_runners (id, queues, workers, started_at, seen_at)
		VALUES (?, ?, ?, `+mysqlNow+`, `+mysqlNow+`)
		ON DUPLICATE KEY UPDATE queues = VALUES(queues), workers = VALUES(workers), seen_at = VALUES(seen_at),
			started_at = CASE WHEN ? THEN VALUES(started_at) ELSE started_at END`,
		r.ID, queuesJSON(r.Queues), r.Workers, starting)
	return err
}

func (c mysqlConn) ForgetRunner(ctx context.Context, id string) error {
	_, err := c.s.db.ExecContext(ctx, "DELETE FROM sheaf_runners WHERE id = ?", id)
	return err
}

// Lead reads the leadership's row locked, then takes, renews or leaves
// it, by the server's clock, in one transaction. Two runners that find no
// row insert at once; the second fails on the primary key and does not
// lead this time.
func (s *mysql) Lead(ctx context.Context, holder string, ttl time.Duration) (res LeadResult, err error) {
	err = s.sqlTx(ctx, func(tx *sql.Tx) error {
		var was string
		var leftUS int64
		err := tx.QueryRowContext(ctx, "SELECT holder, TIMESTAMPDIFF(MICROSECOND, "+mysqlNow+", expires_at) FROM sheaf_leader WHERE name = ? FOR UPDATE",
			leadership).Scan(&was, &leftUS)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, "INSERT INTO sheaf_leader (name, holder, elected_at, expires_at) VALUES (?, ?, "+mysqlNow+
				", "+mysqlNow+" + INTERVAL ? MICROSECOND)", leadership, holder, ttl.Microseconds())
			if isDuplicate(err) {
				return nil
			}
			res.Led = err == nil
			return err
		case err != nil:
			return err
		case was != holder && leftUS > 0:
			res.Left = time.Duration(leftUS) * time.Microsecond
			return nil
		}
		elected := mysqlNow
		if was == holder && leftUS > 0 {
			elected = "elected_at"
		}
		_, err = tx.ExecContext(ctx, "UPDATE sheaf_leader SET holder = ?, elected_at = "+elected+", expires_at = "+mysqlNow+
			" + INTERVAL ? MICROSECOND WHERE name = ?", holder, ttl.Microseconds(), leadership)
		res.Led = err == nil
		return err
	})
	return res, err
}

func (s *mysql) Resign(ctx context.Context, holder string) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM sheaf_leader WHERE name = ? AND holder = ?", leadership, holder)
	return err
}

func (s *mysql) Leader(ctx context.Context) (string, error) {
	return leader(s.db.QueryRowContext(ctx, "SELECT holder FROM sheaf_leader WHERE name = ? AND expires_at > "+mysqlNow, leadership))
}

// mysqlKeeping binds times as times, days as text, lists of IDs as
// numbers; the rows a batch deletes are locked, skipping those locked.
//
// Its sheaf_jobs_finished holds every job (no partial indexes), by kind
// and finish time: the kinds are read from it with a loose index scan.
var mysqlKeeping = keeping{
	kinds: mysqlKinds, kindIn: "%s IN (" + mysqlKinds + ")",
	at: mysqlTime, ts: "?", day: "CAST(? AS DATE)", dayText: "DATE_FORMAT(%s, '%%Y-%%m-%%d')", json: "?", never: "NULL",
	lock: " FOR UPDATE SKIP LOCKED", share: " LOCK IN SHARE MODE",
	in: func(col string, ids []int64) (string, []any) { return col + " IN (" + ints(ids) + ")", nil },
	auditIn: func(_ string, ids []int64) (string, []any) {
		return "target_job IN (" + ints(ids) + ")", nil
	},
	upsert: "ON DUPLICATE KEY UPDATE final_before = VALUES(final_before)",
}

func (s *mysql) Prune(ctx context.Context, p Prune) (res PruneResult, err error) {
	err = s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		res, err = mysqlKeeping.prune(tx, p)
		return err
	})
	return res, err
}

func (s *mysql) FirstFinished(ctx context.Context) (time.Time, bool, error) {
	return mysqlKeeping.firstFinished(ctx, s.gdb)
}

func (s *mysql) Finished(ctx context.Context, from, to time.Time, each func(FinishedJob)) error {
	return mysqlKeeping.finished(ctx, s.gdb, from, to, each)
}

func (s *mysql) PutDay(ctx context.Context, day string, rows []DayRow) error {
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error { return mysqlKeeping.putDay(tx, day, rows) })
}

func (s *mysql) FinalBefore(ctx context.Context) (string, error) {
	return mysqlKeeping.finalBefore(ctx, s.gdb)
}

func (s *mysql) Days(ctx context.Context, db *gorm.DB, q DayQuery) ([]DayRow, error) {
	return mysqlKeeping.days(ctx, db, q)
}

func (s *mysql) DropDays(ctx context.Context, before string) (int64, error) {
	return mysqlKeeping.dropDays(ctx, s.gdb, before)
}

// mysqlKinds selects every kind that has jobs.
const mysqlKinds = "SELECT DISTINCT kind FROM sheaf_jobs"

// mysqlActivity reads the jobs that finished from ? until ?, in queue ?
// (empty for all), as activityPG selects them; the store buckets them.
const mysqlActivity = `
SELECT 1, j.completed_at, j.run_at, j.started_at FROM sheaf_jobs j FORCE INDEX (sheaf_jobs_finished)
WHERE j.status = 'COMPLETED' AND j.kind IN (` + mysqlKinds + `) AND j.completed_at >= ? AND j.completed_at < ? AND (? = '' OR j.queue = ?)
UNION ALL
SELECT 0, j.completed_at, j.run_at, j.started_at FROM sheaf_jobs j
WHERE j.id IN (SELECT job_id FROM sheaf_attempts WHERE finished_at >= ? AND outcome IN ('failed', 'rescued'))
	AND j.status = 'FAILED' AND j.completed_at >= ? AND j.completed_at < ? AND (? = '' OR j.queue = ?)`

func (s *mysql) Activity(ctx context.Context, start, end time.Time, bucket time.Duration, queue string) ([]ActivityRow, error) {
	at, to := mysqlTime(start), mysqlTime(end)
	rows, err := s.db.QueryContext(ctx, mysqlActivity, at, to, queue, queue, at, at, to, queue, queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := activityBuckets{start: start, bucket: bucket}
	for rows.Next() {
		var completed bool
		var done, runAt time.Time
		var started sql.NullTime
		if err := rows.Scan(&completed, &done, &runAt, &started); err != nil {
			return nil, err
		}
		if started.Valid {
			b.add(completed, done, runAt, &started.Time)
		} else {
			b.add(completed, done, runAt, nil)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return b.rows(), nil
}
