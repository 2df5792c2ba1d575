package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"time"

	"gorm.io/gorm"
)

// Queues, runners, attempt history and the audit log: the bookkeeping
// around the jobs. The reads are the same on both databases; where the
// writes differ, each store has its own.

// QueuesChannel carries the name of a queue that was paused or resumed.
const QueuesChannel = "sheaf_queues"

// PausedQueue is a queue paused by hand, and since when.
type PausedQueue struct {
	Name     string
	PausedAt time.Time
}

// QueueCount is how many jobs of a queue have a status; for QUEUED, Oldest
// is the age of the longest-waiting due job (0: none is due).
type QueueCount struct {
	Queue, Status string
	N             int64
	Oldest        time.Duration
}

// Attempt is an attempt that did not complete, as its statement recorded it.
type Attempt struct {
	Claim      int
	Runner     string
	StartedAt  *time.Time
	FinishedAt time.Time
	Outcome    string
	Error      string
}

// KeptAttempts is how many attempts of each job the history keeps.
const KeptAttempts = 20

// RunnerRow is a runner as it describes itself, and when it started and
// was last seen.
type RunnerRow struct {
	ID                string
	Queues            []string
	Workers           int
	StartedAt, SeenAt time.Time
	Leader            bool // it leads the maintenance (read, not written)
}

// forgetRunners is how long the row of a runner that stopped without
// deleting it (it died) is kept: a runner that starts deletes older ones.
const forgetRunners = "1 day"

// AuditEntry is a line of the audit log. A zero At is the database's now.
type AuditEntry struct {
	ID            int64
	At            time.Time
	Actor, Action string
	Target        []byte // JSON; nil is NULL
	Result        string
	Changed       int64
}

// collect runs query on db and reads every row it yields with scan.
func collect[T any](ctx context.Context, db *gorm.DB, scan func(rows *sql.Rows, v *T) error, query string, args ...any) ([]T, error) {
	rows, err := db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// pausedQueues reads the paused queues, by name.
func pausedQueues(ctx context.Context, db *gorm.DB) ([]PausedQueue, error) {
	return collect(ctx, db, func(rows *sql.Rows, q *PausedQueue) error {
		var at sqlTime
		err := rows.Scan(&q.Name, &at)
		q.PausedAt = at.t
		return err
	}, "SELECT name, paused_at FROM sheaf_queues WHERE paused_at IS NOT NULL ORDER BY name")
}

// queueCounts counts the jobs by queue and status, the QUEUED and
// PROCESSING ones only if active; nowSQL is the database's time now.
func queueCounts(ctx context.Context, db *gorm.DB, nowSQL string, active bool) ([]QueueCount, error) {
	return collect(ctx, db, func(rows *sql.Rows, c *QueueCount) error {
		var oldest, t sqlTime
		err := rows.Scan(&c.Queue, &c.Status, &c.N, &oldest, &t)
		if oldest.valid {
			c.Oldest = max(t.t.Sub(oldest.t), 0)
		}
		return err
	}, `SELECT queue, status, count(*), min(CASE WHEN status = 'QUEUED' AND run_at <= `+nowSQL+` THEN run_at END), `+nowSQL+`
		FROM sheaf_jobs WHERE `+statusesIn(active)+` GROUP BY queue, status ORDER BY queue, status`)
}

// history reads job id's recorded attempts, oldest first.
func history(ctx context.Context, db *gorm.DB, id int64) ([]Attempt, error) {
	return collect(ctx, db, func(rows *sql.Rows, a *Attempt) error {
		var started, finished sqlTime
		err := rows.Scan(&a.Claim, &a.Runner, &started, &finished, &a.Outcome, &a.Error)
		a.StartedAt, a.FinishedAt = started.ptr(), finished.t
		return err
	}, `SELECT claim, coalesce(runner, ''), started_at, finished_at, outcome, coalesce(error, '')
		FROM sheaf_attempts WHERE job_id = ? ORDER BY claim`, id)
}

// runnersSeen reads the runners whose rows the condition where (on
// seen_at) selects, by ID, and which of them leads at nowSQL.
func runnersSeen(ctx context.Context, db *gorm.DB, nowSQL, where string, args ...any) ([]RunnerRow, error) {
	return collect(ctx, db, func(rows *sql.Rows, r *RunnerRow) error {
		var queues string
		var started, seen sqlTime
		if err := rows.Scan(&r.ID, &queues, &r.Workers, &started, &seen, &r.Leader); err != nil {
			return err
		}
		r.StartedAt, r.SeenAt = started.t, seen.t
		return json.Unmarshal([]byte(queues), &r.Queues)
	}, `SELECT id, queues, workers, started_at, seen_at, EXISTS (SELECT 1 FROM sheaf_leader l
		WHERE l.name = '`+leadership+`' AND l.holder = sheaf_runners.id AND l.expires_at > `+nowSQL+`)
		FROM sheaf_runners WHERE `+where+" ORDER BY id", args...)
}

// auditLog reads up to limit entries with IDs below before (0: from the
// newest), newest first.
func auditLog(ctx context.Context, db *gorm.DB, before int64, limit int) ([]AuditEntry, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return collect(ctx, db, func(rows *sql.Rows, e *AuditEntry) error {
		var at sqlTime
		err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Result, &e.Changed)
		e.At = at.t
		return err
	}, "SELECT id, at, actor, action, target, result, changed FROM sheaf_audit WHERE id < ? ORDER BY id DESC LIMIT ?", before, limit)
}

func schemaVersion(ctx context.Context, db *sql.DB) (v int, err error) {
	err = db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&v)
	return v, err
}

func queuesJSON(qs []string) string {
	if qs == nil {
		qs = []string{}
	}
	b, _ := json.Marshal(qs)
	return string(b)
}

// PostgreSQL.

func (*postgres) Paused(ctx context.Context, db *gorm.DB) ([]PausedQueue, error) {
	return pausedQueues(ctx, db)
}
func (*postgres) QueueCounts(ctx context.Context, db *gorm.DB, active bool) ([]QueueCount, error) {
	return queueCounts(ctx, db, "now()", active)
}
func (*postgres) History(ctx context.Context, db *gorm.DB, id int64) ([]Attempt, error) {
	return history(ctx, db, id)
}
func (s *postgres) Version(ctx context.Context) (int, error) { return schemaVersion(ctx, s.db) }
func (*postgres) AuditLog(ctx context.Context, db *gorm.DB, before int64, limit int) ([]AuditEntry, error) {
	return auditLog(ctx, db, before, limit)
}

// Runners reads the runners seen within the last within (all, if within is
// not positive), by the database's clock.
func (s *postgres) Runners(ctx context.Context, within time.Duration) ([]RunnerRow, error) {
	if within <= 0 {
		return runnersSeen(ctx, s.gdb, "now()", "true")
	}
	return runnersSeen(ctx, s.gdb, "now()", "seen_at >= now() - ? * interval '1 microsecond'", within.Microseconds())
}

// SetPaused pauses or resumes queue name, and tells the runners. Pausing a
// paused queue keeps the time it was first paused.
func (*postgres) SetPaused(ctx context.Context, db *gorm.DB, name string, paused bool) error {
	return db.WithContext(ctx).Exec(`WITH q AS (
		INSERT INTO sheaf_queues AS q (name, paused_at) VALUES (?, CASE WHEN ? THEN now() END)
		ON CONFLICT (name) DO UPDATE SET paused_at = CASE WHEN excluded.paused_at IS NULL THEN NULL ELSE coalesce(q.paused_at, now()) END,
			updated_at = now()
		RETURNING name)
	SELECT pg_notify('`+QueuesChannel+`', current_schema() || ':' || name) FROM q`, name, paused).Error
}

// RecordAudit appends e to the audit log and returns its ID.
func (*postgres) RecordAudit(ctx context.Context, db *gorm.DB, e AuditEntry) (id int64, err error) {
	var at any
	if !e.At.IsZero() {
		at = e.At
	}
	var target any
	if e.Target != nil {
		target = string(e.Target)
	}
	err = db.WithContext(ctx).Raw(`INSERT INTO sheaf_audit (at, actor, action, target, result, changed)
		VALUES (coalesce(?::timestamptz, now()), ?, ?, ?::jsonb, ?, ?) RETURNING id`,
		at, e.Actor, e.Action, target, e.Result, e.Changed).Row().Scan(&id)
	return id, err
}

// SeeRunner writes r's row, seen now; starting, it starts now too, and
// the rows of runners not seen for forgetRunners are deleted.
func (h *held) SeeRunner(ctx context.Context, r RunnerRow, starting bool) error {
	return h.exec(ctx, `WITH gone AS (DELETE FROM sheaf_runners WHERE $4 AND seen_at < now() - interval '`+forgetRunners+`')
		INSERT INTO sheaf_runners (id, queues, workers) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, workers = excluded.workers, seen_at = now(),
			started_at = CASE WHEN $4 THEN now() ELSE sheaf_runners.started_at END`,
		r.ID, queuesJSON(r.Queues), r.Workers, starting)
}

// ForgetRunner deletes runner id's row.
func (h *held) ForgetRunner(ctx context.Context, id string) error {
	return h.exec(ctx, "DELETE FROM sheaf_runners WHERE id = $1", id)
}

// exec runs a statement that yields no rows on the held connection.
func (h *held) exec(ctx context.Context, query string, args ...any) (err error) {
	rows, err := h.query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { h.DropOn(err) }()
	return rows.Close()
}

// SQLite.

func (*sqlite) Paused(ctx context.Context, db *gorm.DB) ([]PausedQueue, error) {
	return pausedQueues(ctx, db)
}
func (*sqlite) QueueCounts(ctx context.Context, db *gorm.DB, active bool) ([]QueueCount, error) {
	return queueCounts(ctx, db, sqliteNow, active)
}
func (*sqlite) History(ctx context.Context, db *gorm.DB, id int64) ([]Attempt, error) {
	return history(ctx, db, id)
}
func (s *sqlite) Version(ctx context.Context) (int, error) { return schemaVersion(ctx, s.db) }
func (*sqlite) AuditLog(ctx context.Context, db *gorm.DB, before int64, limit int) ([]AuditEntry, error) {
	return auditLog(ctx, db, before, limit)
}

func (s *sqlite) Runners(ctx context.Context, within time.Duration) ([]RunnerRow, error) {
	if within <= 0 {
		return runnersSeen(ctx, s.gdb, sqliteNow, "true")
	}
	return runnersSeen(ctx, s.gdb, sqliteNow, "seen_at >= ?", sqliteTime(now().Add(-within)))
}

// SetPaused tells the runners of this process at once, unless db is a
// caller's transaction: they would read the paused queues before it
// commits, so they find the change at their next read, within a poll.
func (s *sqlite) SetPaused(ctx context.Context, db *gorm.DB, name string, paused bool) error {
	t := sqliteTime(now())
	var at any
	if paused {
		at = t
	}
	err := s.statement(ctx, db, func(db *gorm.DB) error {
		return db.Exec(`INSERT INTO sheaf_queues AS q (name, paused_at, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET paused_at = CASE WHEN excluded.paused_at IS NULL THEN NULL ELSE coalesce(q.paused_at, ?) END,
				updated_at = ?`, name, at, t, t, t).Error
	})
	if err == nil && !inTx(db) {
		s.shared.hub.publish(QueuesChannel, name)
	}
	return err
}

func (s *sqlite) RecordAudit(ctx context.Context, db *gorm.DB, e AuditEntry) (id int64, err error) {
	at := e.At
	if at.IsZero() {
		at = now()
	}
	err = s.statement(ctx, db, func(db *gorm.DB) error {
		return db.Raw(`INSERT INTO sheaf_audit (at, actor, action, target, result, changed)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, sqliteTime(at), e.Actor, e.Action, e.Target, e.Result, e.Changed).Row().Scan(&id)
	})
	return id, err
}

func (c sqliteConn) SeeRunner(ctx context.Context, r RunnerRow, starting bool) error {
	t := now()
	return c.s.writing(ctx, func() error {
		if starting {
			if _, err := c.s.db.ExecContext(ctx, "DELETE FROM sheaf_runners WHERE seen_at < ?1",
				sqliteTime(t.Add(-24*time.Hour))); err != nil {
				return err
			}
		}
		_, err := c.s.db.ExecContext(ctx, `INSERT INTO sheaf_runners (id, queues, workers, started_at, seen_at) VALUES (?1, ?2, ?3, ?4, ?4)
			ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, workers = excluded.workers, seen_at = ?4,
				started_at = CASE WHEN ?5 THEN ?4 ELSE sheaf_runners.started_at END`,
			r.ID, queuesJSON(r.Queues), r.Workers, sqliteTime(t), starting)
		return err
	})
}

func (c sqliteConn) ForgetRunner(ctx context.Context, id string) error {
	return c.s.writing(ctx, func() error {
		_, err := c.s.db.ExecContext(ctx, "DELETE FROM sheaf_runners WHERE id = ?1", id)
		return err
	})
}
