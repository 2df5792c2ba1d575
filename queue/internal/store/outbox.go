package store

// The outbox of package queue/bridge (schema version 13): triggers on the
// jobs table write one row per lifecycle event in the transaction of the
// change, whatever statement or process makes it; the relay reads the rows
// in ID order and deletes each once its broker acknowledged it. A job's
// events are in ID order: the row lock on the job orders the transactions
// that change it, so a later event's row is inserted after the earlier
// one's committed.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// The events the outbox records.
const (
	EventCreated   = "created"   // inserted
	EventRetrying  = "retrying"  // back to QUEUED after a failed (or rescued) attempt, or retried by hand
	EventCompleted = "completed" // COMPLETED
	EventFailed    = "failed"    // FAILED: no attempt left, or failed for good
	EventCancelled = "cancelled" // CANCELLED
	EventStarted   = "started"   // PROCESSING: an attempt began (only while asked for: see EnableOutbox)
)

// OutboxTable holds the events not yet published.
const OutboxTable = "sheaf_outbox"

// OutboxEvent is one row of the outbox.
type OutboxEvent struct {
	ID                    int64 // the event's identity: never reused
	JobID                 int64
	Event                 string
	Kind, Queue           string
	Attempts, MaxAttempts int
	Error                 string // the job's last error, for retrying and failed
	CorrelationID, RunID  string
	Meta                  []byte // the job's metadata, as EncodeMetadata wrote it
	At                    time.Time
}

// A job changes status to PROCESSING (a claim) without an event, and a
// running job put back uncharged (its attempt taken back, as a stopping
// runner does) is no retry.
const outboxChanged = `OLD.status <> NEW.status AND NEW.status <> 'PROCESSING'
	AND NOT (OLD.status = 'PROCESSING' AND NEW.status = 'QUEUED' AND NEW.attempts < OLD.attempts)`

var pgOutboxOn = []string{
	`CREATE TRIGGER sheaf_outbox_created AFTER INSERT ON sheaf_jobs FOR EACH ROW EXECUTE FUNCTION sheaf_outbox_write()`,
	`CREATE TRIGGER sheaf_outbox_changed AFTER UPDATE OF status ON sheaf_jobs FOR EACH ROW WHEN (` + outboxChanged + `)
	EXECUTE FUNCTION sheaf_outbox_write()`,
}

const sqliteOutboxColumns = `NEW.kind, NEW.queue, NEW.attempts, NEW.max_attempts, %s, NEW.correlation_id, NEW.run_id, NEW.meta`

var sqliteOutboxOn = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_created AFTER INSERT ON sheaf_jobs BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'created', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `);
END`,
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_changed AFTER UPDATE OF status ON sheaf_jobs WHEN ` + outboxChanged + ` BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, CASE NEW.status WHEN 'QUEUED' THEN 'retrying' ELSE lower(NEW.status) END, ` +
		fmt.Sprintf(sqliteOutboxColumns, "CASE WHEN NEW.status IN ('QUEUED', 'FAILED') THEN NEW.last_error END") + `);
END`,
}

// The started trigger is apart from the others: it writes a row per claimed
// job, a cost only those who asked for the event pay. Its function is created
// with it, since schema version 13's function names no such event.
const outboxStartedWhen = `OLD.status <> 'PROCESSING' AND NEW.status = 'PROCESSING'`

var pgOutboxStarted = []string{
	`CREATE OR REPLACE FUNCTION sheaf_outbox_started() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'started', NEW.kind, NEW.queue, NEW.attempts, NEW.max_attempts, NULL, NEW.correlation_id, NEW.run_id, NEW.meta);
	RETURN NULL;
END $$`,
	`DROP TRIGGER IF EXISTS sheaf_outbox_started ON sheaf_jobs`,
	`CREATE TRIGGER sheaf_outbox_started AFTER UPDATE OF status ON sheaf_jobs FOR EACH ROW WHEN (` + outboxStartedWhen + `)
	EXECUTE FUNCTION sheaf_outbox_started()`,
}

var sqliteOutboxStarted = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_started AFTER UPDATE OF status ON sheaf_jobs WHEN ` + outboxStartedWhen + ` BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'started', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `);
END`,
}

// mysqlOutboxOn are SQLite's triggers in MariaDB's words: a trigger's
// body is one statement, and a condition is the WHERE of an INSERT ...
// SELECT.
var mysqlOutboxOn = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_created AFTER INSERT ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'created', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `)`,
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_changed AFTER UPDATE ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT NEW.id, CASE NEW.status WHEN 'QUEUED' THEN 'retrying' ELSE lower(NEW.status) END, ` +
		fmt.Sprintf(sqliteOutboxColumns, "CASE WHEN NEW.status IN ('QUEUED', 'FAILED') THEN NEW.last_error END") + `
	FROM DUAL WHERE ` + outboxChanged,
}

var mysqlOutboxStarted = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_started AFTER UPDATE ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT NEW.id, 'started', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `
	FROM DUAL WHERE ` + outboxStartedWhen,
}

var outboxOff = []string{"DROP TRIGGER IF EXISTS sheaf_outbox_created", "DROP TRIGGER IF EXISTS sheaf_outbox_changed",
	"DROP TRIGGER IF EXISTS sheaf_outbox_started"}

// outboxLockTimeout bounds the wait of EnableOutbox and DisableOutbox for
// the lock that creating a trigger takes on the jobs table, which waits
// for every transaction that wrote jobs to end.
const outboxLockTimeout = "10s"

// EnableOutbox makes every lifecycle change of a job, from any process,
// write its event to the outbox, from the commit of this call on, and each
// claim too when started is true. It does nothing when the outbox records
// those events already; it never stops the recording of started events
// (DisableOutbox does).
func EnableOutbox(ctx context.Context, st Store, db *gorm.DB, started bool) error {
	on, withStarted, err := outboxState(ctx, st, db)
	if err != nil || (on && (withStarted || !started)) {
		return err
	}
	pg, lite, liteStarted := pgOutboxOn, sqliteOutboxOn, sqliteOutboxStarted
	if st.Dialect() == "mysql" {
		lite, liteStarted = mysqlOutboxOn, mysqlOutboxStarted
	}
	if on {
		pg, lite = nil, nil
	}
	if started {
		pg, lite = append(slices.Clone(pg), pgOutboxStarted...), append(slices.Clone(lite), liteStarted...)
	}
	return setOutbox(ctx, st, db, pg, lite, on)
}

// DisableOutbox stops the writing of events; the outbox keeps those it
// holds.
func DisableOutbox(ctx context.Context, st Store, db *gorm.DB) error {
	off := make([]string, len(outboxOff))
	for i, s := range outboxOff {
		off[i] = s + " ON sheaf_jobs"
	}
	return setOutbox(ctx, st, db, off, outboxOff, false)
}

// setOutbox runs the statements of st's dialect. keep says the outbox's
// triggers stay as they are apart from what the statements do; otherwise
// they are dropped first on PostgreSQL, whose CREATE TRIGGER has no IF NOT
// EXISTS.
func setOutbox(ctx context.Context, st Store, db *gorm.DB, pg, lite []string, keep bool) error {
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		stmts := lite
		if st.Dialect() == "postgres" {
			stmts = pg
			// Two processes that enable at once take turns; the second
			// then finds the triggers.
			if err := tx.Exec("SET LOCAL lock_timeout = '" + outboxLockTimeout + "'").Error; err != nil {
				return err
			}
			if err := tx.Exec("LOCK TABLE sheaf_jobs IN SHARE ROW EXCLUSIVE MODE").Error; err != nil {
				return fmt.Errorf("lock the jobs table: %w", err)
			}
			if !keep {
				if err := tx.Exec(outboxOff[0] + " ON sheaf_jobs; " + outboxOff[1] + " ON sheaf_jobs").Error; err != nil {
					return err
				}
			}
		}
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// OutboxOn reports whether the outbox's triggers exist.
func OutboxOn(ctx context.Context, st Store, db *gorm.DB) (bool, error) {
	on, _, err := outboxState(ctx, st, db)
	return on, err
}

// outboxState reports whether the outbox's triggers of the lifecycle events
// exist, and whether its trigger of started events does.
func outboxState(ctx context.Context, st Store, db *gorm.DB) (on, started bool, err error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'sheaf_outbox_%'`
	if st.Dialect() == "mysql" {
		q = `SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()
			AND trigger_name LIKE 'sheaf_outbox_%'`
	}
	if st.Dialect() == "postgres" {
		q = `SELECT tgname FROM pg_trigger WHERE tgrelid = 'sheaf_jobs'::regclass AND tgname LIKE 'sheaf_outbox_%'`
	}
	var names []string
	if err := db.WithContext(ctx).Raw(q).Scan(&names).Error; err != nil {
		return false, false, err
	}
	return slices.Contains(names, "sheaf_outbox_created") && slices.Contains(names, "sheaf_outbox_changed"),
		slices.Contains(names, "sheaf_outbox_started"), nil
}

// OutboxEvents reads the first limit events of the outbox, in ID order,
// on db's pool (not in a transaction).
func OutboxEvents(ctx context.Context, db *gorm.DB, limit int) ([]OutboxEvent, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	rows, err := sqlDB.QueryContext(ctx, `SELECT id, job_id, event, kind, queue, attempts, max_attempts,
		error, correlation_id, run_id, meta, at FROM sheaf_outbox ORDER BY id LIMIT `+strconv.Itoa(limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OutboxEvent
	for rows.Next() {
		var e OutboxEvent
		var errText, corr, run sql.NullString
		var at sqlTime
		if err := rows.Scan(&e.ID, &e.JobID, &e.Event, &e.Kind, &e.Queue, &e.Attempts, &e.MaxAttempts,
			&errText, &corr, &run, &e.Meta, &at); err != nil {
			return nil, err
		}
		e.Error, e.CorrelationID, e.RunID, e.At = errText.String, corr.String, run.String, at.t
		out = append(out, e)
	}
	return out, rows.Err()
}

// DeleteOutbox deletes the events ids names: those their broker
// acknowledged. On PostgreSQL the IDs are bound as one array, so the
// statement's text and plan are the same for every batch.
func DeleteOutbox(ctx context.Context, st Store, db *gorm.DB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if st.Dialect() == "postgres" {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		_, err = sqlDB.ExecContext(ctx, "DELETE FROM sheaf_outbox WHERE id = ANY($1)", ids)
		return err
	}
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("DELETE FROM sheaf_outbox WHERE id IN ?", ids).Error
	})
}
