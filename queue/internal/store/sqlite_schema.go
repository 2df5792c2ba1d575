package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// sqliteNow is the time now in SQL, in timeLayout (to the millisecond: the
// store writes its own times, to the nanosecond; this is for rows written by
// hand).
const sqliteNow = `strftime('%Y-%m-%d %H:%M:%f000000+00:00', 'now')`

// sqliteMigrations are the schema versions on SQLite, the same versions as
// PostgreSQL's: text for jsonb and timestamps, and the same partial indexes.
var sqliteMigrations = []string{
	1: `
CREATE TABLE sheaf_jobs (
	id              INTEGER   PRIMARY KEY AUTOINCREMENT, -- never reused: late results name jobs by ID
	kind            TEXT      NOT NULL,
	queue           TEXT      NOT NULL DEFAULT 'default',
	status          TEXT      NOT NULL DEFAULT 'QUEUED'
	                CHECK (status IN ('QUEUED', 'PROCESSING', 'COMPLETED', 'FAILED', 'CANCELLED')),
	priority        INTEGER   NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
	payload         BLOB      NOT NULL DEFAULT '{}', -- JSON, as bytes: it is read into json.RawMessage
	idempotency_key TEXT,
	correlation_id  TEXT,
	attempts        INTEGER   NOT NULL DEFAULT 0,
	max_attempts    INTEGER   NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	backoff         TEXT,
	run_at          TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	locked_until    TIMESTAMP,
	locked_by       TEXT,
	created_at      TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	started_at      TIMESTAMP,
	completed_at    TIMESTAMP,
	processed       INTEGER   NOT NULL DEFAULT 0,
	total           INTEGER,
	last_error      TEXT,
	auth            TEXT
);
CREATE INDEX sheaf_jobs_claim ON sheaf_jobs (queue, priority DESC, run_at, id) WHERE status = 'QUEUED';
CREATE INDEX sheaf_jobs_lease ON sheaf_jobs (locked_until) WHERE locked_until IS NOT NULL;
CREATE UNIQUE INDEX sheaf_jobs_idempotency ON sheaf_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX sheaf_jobs_correlation ON sheaf_jobs (correlation_id) WHERE correlation_id IS NOT NULL;
`,
	2: `
ALTER TABLE sheaf_jobs ADD COLUMN run_id TEXT;
ALTER TABLE sheaf_jobs ADD COLUMN period TEXT;
ALTER TABLE sheaf_jobs ADD COLUMN parent_ids TEXT; -- {1,2,3}, as PostgreSQL writes a bigint[]
ALTER TABLE sheaf_jobs ADD COLUMN output BLOB; -- JSON, as bytes
CREATE INDEX sheaf_jobs_run ON sheaf_jobs (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX sheaf_jobs_period ON sheaf_jobs (period, kind) WHERE period IS NOT NULL;
CREATE INDEX sheaf_jobs_history ON sheaf_jobs (kind, completed_at) WHERE status = 'COMPLETED';
CREATE TABLE sheaf_schedules (
	name       TEXT      PRIMARY KEY,
	last_tick  TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `)
);
`,
	3: `
ALTER TABLE sheaf_jobs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sheaf_jobs ADD COLUMN rescues INTEGER NOT NULL DEFAULT 0;
UPDATE sheaf_jobs SET claims = attempts WHERE status = 'PROCESSING';
DROP INDEX sheaf_jobs_claim;
CREATE INDEX sheaf_jobs_claim ON sheaf_jobs (queue, priority DESC, run_at, id) WHERE status = 'QUEUED' AND rescues = 0;
CREATE INDEX sheaf_jobs_suspect ON sheaf_jobs (priority DESC, run_at, id) WHERE status = 'QUEUED' AND rescues > 0;
-- JSON is kept as bytes, which the driver hands over as the []byte that
-- JobRecord's json.RawMessage fields read; text written by hand is turned
-- into bytes. (The store writes bytes, so these never fire for it.)
CREATE TRIGGER sheaf_jobs_payload_bytes AFTER UPDATE OF payload ON sheaf_jobs WHEN typeof(NEW.payload) = 'text'
BEGIN UPDATE sheaf_jobs SET payload = CAST(NEW.payload AS BLOB) WHERE id = NEW.id; END;
CREATE TRIGGER sheaf_jobs_output_bytes AFTER UPDATE OF output ON sheaf_jobs WHEN typeof(NEW.output) = 'text'
BEGIN UPDATE sheaf_jobs SET output = CAST(NEW.output AS BLOB) WHERE id = NEW.id; END;
CREATE TRIGGER sheaf_jobs_insert_bytes AFTER INSERT ON sheaf_jobs
	WHEN typeof(NEW.payload) = 'text' OR typeof(NEW.output) = 'text'
BEGIN UPDATE sheaf_jobs SET payload = CAST(NEW.payload AS BLOB), output = CAST(NEW.output AS BLOB) WHERE id = NEW.id; END;
`,
	4: `
CREATE TABLE sheaf_queues (
	name       TEXT      PRIMARY KEY,
	paused_at  TIMESTAMP,
	updated_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `)
);
CREATE TABLE sheaf_attempts (
	job_id      INTEGER   NOT NULL,
	claim       INTEGER   NOT NULL,
	runner      TEXT,
	started_at  TIMESTAMP,
	finished_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	outcome     TEXT      NOT NULL,
	error       TEXT,
	PRIMARY KEY (job_id, claim)
);
CREATE TABLE sheaf_runners (
	id         TEXT      PRIMARY KEY,
	queues     TEXT      NOT NULL,
	workers    INTEGER   NOT NULL,
	started_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	seen_at    TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `)
);
CREATE TABLE sheaf_audit (
	id      INTEGER   PRIMARY KEY AUTOINCREMENT,
	at      TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	actor   TEXT      NOT NULL,
	action  TEXT      NOT NULL,
	target  BLOB, -- JSON, as bytes
	result  TEXT      NOT NULL,
	changed INTEGER   NOT NULL DEFAULT 0
);
`,
	5: `
CREATE INDEX sheaf_jobs_failed ON sheaf_jobs (status, id) WHERE status IN ('FAILED', 'CANCELLED');
`,
	6: `
ALTER TABLE sheaf_jobs ADD COLUMN metadata TEXT; -- JSON object of strings, as auth
`,
	7: `
-- Metadata as bytes, in a column of its own, as on PostgreSQL; claims read
-- version 6's metadata for the jobs enqueued before.
ALTER TABLE sheaf_jobs ADD COLUMN meta BLOB;
`,
	8: `
-- The runner that leads the maintenance, as on PostgreSQL; the write lock
-- serialises its elections, and the processes on a file share a clock.
CREATE TABLE sheaf_leader (
	name       TEXT      PRIMARY KEY,
	holder     TEXT      NOT NULL,
	elected_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	expires_at TIMESTAMP NOT NULL
);
`,
	9: `
CREATE TABLE sheaf_history (
	day       TEXT    NOT NULL, -- 2006-01-02, UTC
	kind      TEXT    NOT NULL,
	queue     TEXT    NOT NULL,
	completed INTEGER NOT NULL DEFAULT 0,
	failed    INTEGER NOT NULL DEFAULT 0,
	cancelled INTEGER NOT NULL DEFAULT 0,
	retries   INTEGER NOT NULL DEFAULT 0,
	p50_us    INTEGER NOT NULL DEFAULT 0,
	p95_us    INTEGER NOT NULL DEFAULT 0,
	max_us    INTEGER NOT NULL DEFAULT 0,
	errors    TEXT, -- JSON object of counts
	PRIMARY KEY (day, kind, queue)
);
CREATE TABLE sheaf_rollup (
	id           INTEGER PRIMARY KEY CHECK (id = 1),
	final_before TEXT    NOT NULL -- 2006-01-02
);
CREATE INDEX sheaf_jobs_finished ON sheaf_jobs (completed_at) WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED');
CREATE INDEX sheaf_audit_job ON sheaf_audit ((CAST(target AS TEXT) ->> '$.job'));
`,
	10: `
-- Alerts, as on PostgreSQL.
CREATE TABLE sheaf_alert_episodes (
	id          INTEGER   PRIMARY KEY AUTOINCREMENT,
	rule        TEXT      NOT NULL,
	key         TEXT      NOT NULL,
	state       TEXT      NOT NULL CHECK (state IN ('pending', 'firing', 'resolved', 'once')),
	kind        TEXT      NOT NULL DEFAULT '',
	queue       TEXT      NOT NULL DEFAULT '',
	summary     TEXT      NOT NULL DEFAULT '',
	started_at  TIMESTAMP NOT NULL,
	fired_at    TIMESTAMP,
	notified    BOOLEAN   NOT NULL DEFAULT false,
	resolved_at TIMESTAMP
);
CREATE UNIQUE INDEX sheaf_alert_episodes_open ON sheaf_alert_episodes (rule, key) WHERE state <> 'resolved';
CREATE TABLE sheaf_alert_notices (
	id         INTEGER   PRIMARY KEY AUTOINCREMENT,
	event_id   TEXT      NOT NULL,
	episode_id INTEGER,
	sink       TEXT      NOT NULL,
	body       BLOB      NOT NULL,
	created_at TIMESTAMP NOT NULL,
	next_at    TIMESTAMP NOT NULL,
	attempts   INTEGER   NOT NULL DEFAULT 0,
	last_error TEXT,
	sent_at    TIMESTAMP,
	UNIQUE (event_id, sink)
);
CREATE INDEX sheaf_alert_notices_due ON sheaf_alert_notices (next_at) WHERE sent_at IS NULL;
CREATE TABLE sheaf_alert_silences (
	id         INTEGER   PRIMARY KEY AUTOINCREMENT,
	rule       TEXT      NOT NULL,
	kind       TEXT      NOT NULL DEFAULT '',
	queue      TEXT      NOT NULL DEFAULT '',
	until      TIMESTAMP NOT NULL,
	actor      TEXT      NOT NULL DEFAULT '',
	reason     TEXT      NOT NULL DEFAULT '',
	created_at TIMESTAMP NOT NULL
);
`,
	11: `
CREATE TABLE sheaf_ticks (
	schedule    TEXT      NOT NULL,
	at          TIMESTAMP NOT NULL,
	outcome     TEXT      NOT NULL CHECK (outcome IN ('fired', 'late', 'missed')),
	recorded_at TIMESTAMP NOT NULL,
	run_id      TEXT      NOT NULL,
	jobs        INTEGER   NOT NULL DEFAULT 0,
	PRIMARY KEY (schedule, at)
);
CREATE INDEX sheaf_ticks_at ON sheaf_ticks (at);
ALTER TABLE sheaf_schedules ADD COLUMN started_at TIMESTAMP;
`,
	12: `
-- Runs, as on PostgreSQL. Every write takes the file's lock, so triggers
-- keep the table, at no cost to jobs without a run: the first job of a run
-- adds its row, and a job inserted into a finished run, or retried, clears
-- its counts. The run index already ends with the job's ID (the rowid).
CREATE TABLE sheaf_runs (
	run_id        TEXT      PRIMARY KEY,
	period        TEXT,
	first_created TIMESTAMP NOT NULL,
	last_created  TIMESTAMP,
	max_id        INTEGER,
	counts        TEXT -- JSON object of counts by status
);
CREATE INDEX sheaf_runs_first ON sheaf_runs (first_created DESC, run_id DESC);
CREATE INDEX sheaf_runs_open ON sheaf_runs (first_created) WHERE counts IS NULL;
INSERT INTO sheaf_runs (run_id, period, first_created)
	SELECT run_id, min(period), min(created_at) FROM sheaf_jobs WHERE run_id IS NOT NULL GROUP BY run_id;
CREATE TRIGGER sheaf_jobs_run_added AFTER INSERT ON sheaf_jobs WHEN NEW.run_id IS NOT NULL BEGIN
	INSERT INTO sheaf_runs (run_id, period, first_created) VALUES (NEW.run_id, NEW.period, NEW.created_at)
		ON CONFLICT (run_id) DO UPDATE SET counts = NULL WHERE counts IS NOT NULL;
END;
CREATE TRIGGER sheaf_jobs_run_reopened AFTER UPDATE OF status ON sheaf_jobs
WHEN NEW.run_id IS NOT NULL AND NEW.status IN ('QUEUED', 'PROCESSING') AND OLD.status NOT IN ('QUEUED', 'PROCESSING') BEGIN
	UPDATE sheaf_runs SET counts = NULL WHERE run_id = NEW.run_id AND counts IS NOT NULL;
END;
`,
	13: `
-- The outbox, as on PostgreSQL; its triggers are created by EnableOutbox.
CREATE TABLE sheaf_outbox (
	id             INTEGER   PRIMARY KEY AUTOINCREMENT,
	job_id         INTEGER   NOT NULL,
	event          TEXT      NOT NULL,
	kind           TEXT      NOT NULL,
	queue          TEXT      NOT NULL,
	attempts       INTEGER   NOT NULL,
	max_attempts   INTEGER   NOT NULL,
	error          TEXT,
	correlation_id TEXT,
	run_id         TEXT,
	meta           BLOB,
	at             TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `)
);
`,
	14: `
-- Limits, as on PostgreSQL.
ALTER TABLE sheaf_jobs ADD COLUMN limit_key TEXT;
CREATE TABLE sheaf_limits (
	scope       TEXT      NOT NULL CHECK (scope IN ('kind', 'queue', 'key')),
	target      TEXT      NOT NULL,
	concurrency INTEGER   NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
	rate        INTEGER   NOT NULL DEFAULT 0 CHECK (rate >= 0),
	period_ms   INTEGER   NOT NULL DEFAULT 0 CHECK (period_ms >= 0),
	suspended   BOOLEAN   NOT NULL DEFAULT false,
	changed_by  TEXT      NOT NULL DEFAULT '',
	changed_at  TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `),
	PRIMARY KEY (scope, target)
);
CREATE TABLE sheaf_limit_starts (
	scope  TEXT      NOT NULL,
	target TEXT      NOT NULL,
	key    TEXT      NOT NULL,
	at     TIMESTAMP NOT NULL
);
CREATE INDEX sheaf_limit_starts_at ON sheaf_limit_starts (scope, target, at);
`,
	15: `
-- Hour roll-ups, as on PostgreSQL.
CREATE TABLE sheaf_hours (
	hour      TIMESTAMP NOT NULL,
	kind      TEXT      NOT NULL,
	queue     TEXT      NOT NULL,
	completed INTEGER   NOT NULL DEFAULT 0,
	failed    INTEGER   NOT NULL DEFAULT 0,
	cancelled INTEGER   NOT NULL DEFAULT 0,
	wait_p50  REAL      NOT NULL DEFAULT 0,
	wait_p95  REAL      NOT NULL DEFAULT 0,
	run_p50   REAL      NOT NULL DEFAULT 0,
	run_p95   REAL      NOT NULL DEFAULT 0,
	PRIMARY KEY (hour, kind, queue)
);
CREATE TABLE sheaf_hours_final (
	id           INTEGER   PRIMARY KEY CHECK (id = 1),
	kept_from    TIMESTAMP NOT NULL,
	final_before TIMESTAMP NOT NULL
);
`,
	16: `
-- Fair share among the keys of a kind, as on PostgreSQL.
ALTER TABLE sheaf_limits ADD COLUMN fair BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX sheaf_jobs_keyed ON sheaf_jobs (kind, limit_key, priority DESC, run_at, id)
	WHERE status = 'QUEUED' AND limit_key IS NOT NULL;
`,
	17: `
-- Chunk times, as on PostgreSQL.
ALTER TABLE sheaf_jobs ADD COLUMN chunk_times TEXT;
`,
	18: `
-- A run's latest finish, as on PostgreSQL.
ALTER TABLE sheaf_runs ADD COLUMN last_finished TIMESTAMP;
UPDATE sheaf_runs SET last_finished = (SELECT max(completed_at) FROM sheaf_jobs j WHERE j.run_id = sheaf_runs.run_id)
	WHERE counts IS NOT NULL;
`,
	19: `
-- The weights of fair share, as on PostgreSQL.
CREATE TABLE sheaf_limit_weights (
	target    TEXT    NOT NULL,
	limit_key TEXT    NOT NULL,
	weight    INTEGER NOT NULL CHECK (weight >= 1),
	PRIMARY KEY (target, limit_key)
);
`,
	20: `
-- A run's failed and cancelled jobs, as on PostgreSQL.
CREATE INDEX sheaf_jobs_run_failed ON sheaf_jobs (run_id, id) WHERE status IN ('FAILED', 'CANCELLED');
`,
	21: `
-- Nothing: the version changes how PostgreSQL plans its limited claims.
`,
	22: finishedByKindSQL,
	23: `ALTER TABLE sheaf_runs ADD COLUMN kinds TEXT;`,
	24: `ALTER TABLE sheaf_runs ADD COLUMN slow TEXT;`,
	25: `
-- Nothing: the version tunes how PostgreSQL vacuums the jobs table.
`,
	26: `
-- Nothing: the version drops MariaDB's index of leases.
`,
}

const sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS sheaf_migrations (
	version    INTEGER   PRIMARY KEY,
	applied_at TIMESTAMP NOT NULL DEFAULT (` + sqliteNow + `)
);`

func (*sqlite) Migrations() []string { return migrationList(sqliteMigrationsTable, sqliteMigrations) }

// Migrate applies the versions in one transaction, in the process's turn
// to write; a process that migrates at the same time waits in SQLite's busy
// handler, then finds nothing to do.
func (s *sqlite) Migrate(ctx context.Context) (found int, err error) {
	err = s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		if err := tx.Exec(sqliteMigrationsTable).Error; err != nil {
			return err
		}
		if err := tx.Raw("SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&found).Error; err != nil {
			return err
		}
		ups := s.Migrations()
		if err := checkTables(tx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ?", ups, found); err != nil {
			return err
		}
		for v := found + 1; v <= SchemaVersion; v++ {
			if err := tx.Exec(ups[v-1]).Error; err != nil {
				return fmt.Errorf("to version %d: %w", v, err)
			}
		}
		return nil
	})
	return found, err
}

// sqliteRoom stands for "no server limit": SQLite has no connection cap.
const sqliteRoom = 1 << 20

func (s *sqlite) Preflight(ctx context.Context) (version, room int, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&version)
	return version, sqliteRoom, err
}

// Analyze reads at most analysisLimit rows of each index, as SQLite
// advises for the planner's statistics: a full pass after a large bulk
// would cost the bulk some 5% of its time, holding the write turn.
// The limit is the connection's, so it is set and reset around the ANALYZE,
// in one call on one connection.
func (s *sqlite) Analyze(ctx context.Context) error {
	return s.writing(ctx, func() error {
		return s.gdb.WithContext(ctx).Exec(fmt.Sprintf("PRAGMA analysis_limit = %d; ANALYZE sheaf_jobs; PRAGMA analysis_limit = 0",
			analysisLimit)).Error
	})
}

// analysisLimit is within the 100 to 1000 rows SQLite's documentation
// finds enough for most applications.
const analysisLimit = 1000
