package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// mysqlMigrations are the schema versions on MariaDB, the same versions
// as PostgreSQL's (see migrations for what each is for), so that a change
// adds one entry to each list and the checks of a partial schema read the
// same tables at the same versions everywhere.
//
// What differs from PostgreSQL: text that is indexed is VARCHAR(255) (an
// index takes no TEXT whole); JSON is LONGTEXT, whose LIKE ignores case as
// ILIKE does; times are DATETIME(6) in UTC; the partial indexes are
// ordinary ones (MariaDB has none), which also hold the rows the predicate
// left out; the partial unique index of open alert episodes is a unique
// index on a generated column that is NULL for resolved episodes.
var mysqlMigrations = []string{
	1: `
CREATE TABLE sheaf_jobs (
	id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY, -- never reused: late results name jobs by ID
	kind            VARCHAR(255) NOT NULL,
	queue           VARCHAR(255) NOT NULL DEFAULT 'default',
	status          VARCHAR(16)  NOT NULL DEFAULT 'QUEUED'
	                CHECK (status IN ('QUEUED', 'PROCESSING', 'COMPLETED', 'FAILED', 'CANCELLED')),
	priority        SMALLINT     NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
	payload         LONGTEXT     NOT NULL DEFAULT '{}',
	idempotency_key VARCHAR(255),
	correlation_id  VARCHAR(255),
	attempts        INT          NOT NULL DEFAULT 0,
	max_attempts    INT          NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	backoff         LONGTEXT,
	run_at          DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	locked_until    DATETIME(6),
	locked_by       VARCHAR(255),
	created_at      DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	started_at      DATETIME(6),
	completed_at    DATETIME(6),
	processed       BIGINT       NOT NULL DEFAULT 0,
	total           BIGINT,
	last_error      LONGTEXT,
	auth            LONGTEXT,
	INDEX sheaf_jobs_lease (locked_until),
	UNIQUE INDEX sheaf_jobs_idempotency (idempotency_key),
	INDEX sheaf_jobs_correlation (correlation_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;
`,
	2: `
ALTER TABLE sheaf_jobs
	ADD COLUMN run_id     VARCHAR(255),
	ADD COLUMN period     VARCHAR(255),
	ADD COLUMN parent_ids LONGTEXT, -- {1,2,3}, as PostgreSQL writes a bigint[]
	ADD COLUMN output     LONGTEXT,
	ADD INDEX sheaf_jobs_period (period, kind),
	ADD INDEX sheaf_jobs_history (kind, status, completed_at);
CREATE TABLE sheaf_schedules (
	name       VARCHAR(255) NOT NULL PRIMARY KEY,
	last_tick  DATETIME(6)  NOT NULL,
	updated_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	3: `
-- The claim walks sheaf_jobs_claim in order: queue, status and rescues
-- are equalities, then the claim order.
ALTER TABLE sheaf_jobs
	ADD COLUMN claims  INT NOT NULL DEFAULT 0,
	ADD COLUMN rescues INT NOT NULL DEFAULT 0,
	ADD INDEX sheaf_jobs_claim (queue, status, rescues, priority DESC, run_at, id);
`,
	4: `
CREATE TABLE sheaf_queues (
	name       VARCHAR(255) NOT NULL PRIMARY KEY,
	paused_at  DATETIME(6),
	updated_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_attempts (
	job_id      BIGINT       NOT NULL,
	claim       INT          NOT NULL,
	runner      VARCHAR(255),
	started_at  DATETIME(6),
	finished_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	outcome     VARCHAR(16)  NOT NULL,
	error       LONGTEXT,
	PRIMARY KEY (job_id, claim)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_runners (
	id         VARCHAR(255) NOT NULL PRIMARY KEY,
	queues     LONGTEXT     NOT NULL,
	workers    INT          NOT NULL,
	started_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	seen_at    DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_audit (
	id      BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	at      DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	actor   VARCHAR(255) NOT NULL,
	action  VARCHAR(255) NOT NULL,
	target  LONGTEXT,
	result  LONGTEXT     NOT NULL,
	changed BIGINT       NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	5: `
ALTER TABLE sheaf_jobs ADD INDEX sheaf_jobs_failed (status, id);
`,
	6: `
ALTER TABLE sheaf_jobs ADD COLUMN metadata LONGTEXT;
`,
	7: `
ALTER TABLE sheaf_jobs ADD COLUMN meta BLOB;
`,
	8: `
-- The runner that leads the maintenance, as on PostgreSQL. Rows named
-- lock:... stand in for PostgreSQL's advisory locks (LockGroup).
CREATE TABLE sheaf_leader (
	name       VARCHAR(64)  NOT NULL PRIMARY KEY,
	holder     VARCHAR(255) NOT NULL,
	elected_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	expires_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	9: `
CREATE TABLE sheaf_history (
	day       DATE         NOT NULL,
	kind      VARCHAR(255) NOT NULL,
	queue     VARCHAR(255) NOT NULL,
	completed BIGINT       NOT NULL DEFAULT 0,
	failed    BIGINT       NOT NULL DEFAULT 0,
	cancelled BIGINT       NOT NULL DEFAULT 0,
	retries   BIGINT       NOT NULL DEFAULT 0,
	p50_us    BIGINT       NOT NULL DEFAULT 0,
	p95_us    BIGINT       NOT NULL DEFAULT 0,
	max_us    BIGINT       NOT NULL DEFAULT 0,
	errors    LONGTEXT,
	PRIMARY KEY (day, kind, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_rollup (
	id           INT  NOT NULL PRIMARY KEY CHECK (id = 1),
	final_before DATE NOT NULL
) ENGINE = InnoDB;
ALTER TABLE sheaf_jobs ADD INDEX sheaf_jobs_finished (completed_at);
-- The job an audit entry targets alone, which goes with it.
ALTER TABLE sheaf_audit
	ADD COLUMN target_job BIGINT AS (JSON_VALUE(target, '$.job')) VIRTUAL,
	ADD INDEX sheaf_audit_job (target_job);
`,
	10: `
-- At most one open episode per rule and key: open_flag is NULL once
-- resolved, and a unique index admits any number of NULLs.
CREATE TABLE sheaf_alert_episodes (
	id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	rule        VARCHAR(255) NOT NULL,
	` + "`key`" + `       VARCHAR(255) NOT NULL,
	state       VARCHAR(16)  NOT NULL CHECK (state IN ('pending', 'firing', 'resolved', 'once')),
	kind        VARCHAR(255) NOT NULL DEFAULT '',
	queue       VARCHAR(255) NOT NULL DEFAULT '',
	summary     LONGTEXT     NOT NULL DEFAULT '',
	started_at  DATETIME(6)  NOT NULL,
	fired_at    DATETIME(6),
	notified    BOOLEAN      NOT NULL DEFAULT false,
	resolved_at DATETIME(6),
	open_flag   TINYINT AS (CASE WHEN state <> 'resolved' THEN 1 END) PERSISTENT,
	UNIQUE INDEX sheaf_alert_episodes_open (rule, ` + "`key`" + `, open_flag)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_alert_notices (
	id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	event_id   VARCHAR(255) NOT NULL,
	episode_id BIGINT,
	sink       VARCHAR(255) NOT NULL,
	body       LONGBLOB     NOT NULL,
	created_at DATETIME(6)  NOT NULL,
	next_at    DATETIME(6)  NOT NULL,
	attempts   INT          NOT NULL DEFAULT 0,
	last_error LONGTEXT,
	sent_at    DATETIME(6),
	UNIQUE (event_id, sink),
	INDEX sheaf_alert_notices_due (sent_at, next_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_alert_silences (
	id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	rule       VARCHAR(255) NOT NULL,
	kind       VARCHAR(255) NOT NULL DEFAULT '',
	queue      VARCHAR(255) NOT NULL DEFAULT '',
	until      DATETIME(6)  NOT NULL,
	actor      VARCHAR(255) NOT NULL DEFAULT '',
	reason     LONGTEXT     NOT NULL DEFAULT '',
	created_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	11: `
CREATE TABLE sheaf_ticks (
	schedule    VARCHAR(255) NOT NULL,
	at          DATETIME(6)  NOT NULL,
	outcome     VARCHAR(16)  NOT NULL CHECK (outcome IN ('fired', 'late', 'missed')),
	recorded_at DATETIME(6)  NOT NULL,
	run_id      VARCHAR(255) NOT NULL,
	jobs        INT          NOT NULL DEFAULT 0,
	PRIMARY KEY (schedule, at),
	INDEX sheaf_ticks_at (at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
ALTER TABLE sheaf_schedules ADD COLUMN started_at DATETIME(6);
`,
	12: `
-- Runs, as on PostgreSQL: the statements that insert jobs add their runs'
-- rows, and those that insert into a finished run, or retry its jobs,
-- clear its counts (no trigger: one would cost every insert and every
-- change of status of every job).
CREATE TABLE sheaf_runs (
	run_id        VARCHAR(255) NOT NULL PRIMARY KEY,
	period        VARCHAR(255),
	first_created DATETIME(6)  NOT NULL,
	last_created  DATETIME(6),
	max_id        BIGINT,
	counts        LONGTEXT,
	INDEX sheaf_runs_first (first_created DESC, run_id DESC),
	INDEX sheaf_runs_open (counts(1), first_created)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT INTO sheaf_runs (run_id, period, first_created)
	SELECT run_id, min(period), min(created_at) FROM sheaf_jobs WHERE run_id IS NOT NULL GROUP BY run_id;
ALTER TABLE sheaf_jobs ADD INDEX sheaf_jobs_run_id (run_id, id);
`,
	13: `
CREATE TABLE sheaf_outbox (
	id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	job_id         BIGINT       NOT NULL,
	event          VARCHAR(16)  NOT NULL,
	kind           VARCHAR(255) NOT NULL,
	queue          VARCHAR(255) NOT NULL,
	attempts       INT          NOT NULL,
	max_attempts   INT          NOT NULL,
	error          LONGTEXT,
	correlation_id VARCHAR(255),
	run_id         VARCHAR(255),
	meta           BLOB,
	at             DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	14: `
-- Limits' tables, as on PostgreSQL, so that the versions mean one schema;
-- MariaDB does not enforce limits yet (mysql_limits.go).
ALTER TABLE sheaf_jobs ADD COLUMN limit_key VARCHAR(255);
CREATE TABLE sheaf_limits (
	scope       VARCHAR(8)   NOT NULL CHECK (scope IN ('kind', 'queue', 'key')),
	target      VARCHAR(255) NOT NULL,
	concurrency INT          NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
	rate        INT          NOT NULL DEFAULT 0 CHECK (rate >= 0),
	period_ms   BIGINT       NOT NULL DEFAULT 0 CHECK (period_ms >= 0),
	suspended   BOOLEAN      NOT NULL DEFAULT false,
	changed_by  VARCHAR(255) NOT NULL DEFAULT '',
	changed_at  DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	PRIMARY KEY (scope, target)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_limit_starts (
	scope  VARCHAR(8)   NOT NULL,
	target VARCHAR(255) NOT NULL,
	` + "`key`" + `  VARCHAR(255) NOT NULL,
	at     DATETIME(6)  NOT NULL,
	INDEX sheaf_limit_starts_at (scope, target, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	15: `
-- Hour roll-ups, as on PostgreSQL.
CREATE TABLE sheaf_hours (
	hour      DATETIME(6)  NOT NULL,
	kind      VARCHAR(255) NOT NULL,
	queue     VARCHAR(255) NOT NULL,
	completed BIGINT       NOT NULL DEFAULT 0,
	failed    BIGINT       NOT NULL DEFAULT 0,
	cancelled BIGINT       NOT NULL DEFAULT 0,
	wait_p50  DOUBLE       NOT NULL DEFAULT 0,
	wait_p95  DOUBLE       NOT NULL DEFAULT 0,
	run_p50   DOUBLE       NOT NULL DEFAULT 0,
	run_p95   DOUBLE       NOT NULL DEFAULT 0,
	PRIMARY KEY (hour, kind, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
CREATE TABLE sheaf_hours_final (
	id           INT         NOT NULL PRIMARY KEY CHECK (id = 1),
	kept_from    DATETIME(6) NOT NULL,
	final_before DATETIME(6) NOT NULL
) ENGINE = InnoDB;
`,
	16: `
-- As on PostgreSQL, though MariaDB and MySQL do not enforce limits yet.
ALTER TABLE sheaf_limits ADD COLUMN fair BOOLEAN NOT NULL DEFAULT false;
`,
	17: `
-- Chunk times, as on PostgreSQL.
ALTER TABLE sheaf_jobs ADD COLUMN chunk_times TEXT;
`,
	18: `
-- A run's latest finish, as on PostgreSQL.
ALTER TABLE sheaf_runs ADD COLUMN last_finished DATETIME(6);
UPDATE sheaf_runs r SET last_finished = (SELECT max(completed_at) FROM sheaf_jobs j WHERE j.run_id = r.run_id)
	WHERE counts IS NOT NULL;
`,
	19: `
-- The weights of fair share, as on PostgreSQL.
CREATE TABLE sheaf_limit_weights (
	target    VARCHAR(255) NOT NULL,
	limit_key VARCHAR(255) NOT NULL,
	weight    INT          NOT NULL CHECK (weight >= 1),
	PRIMARY KEY (target, limit_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
`,
	20: `
-- No index: MariaDB and MySQL have no partial indexes, and one of every
-- job's run and status would be written at every claim and completion to
-- speed up a review; a run's failed jobs are read through sheaf_jobs_run_id.
`,
	21: `
-- Nothing: the version changes how PostgreSQL plans its limited claims.
`,
	22: `
-- One index of jobs by kind and finish time, as on PostgreSQL; without
-- status, which a claim changes, a claim no longer moves an entry in it.
ALTER TABLE sheaf_jobs
	DROP INDEX sheaf_jobs_history,
	DROP INDEX sheaf_jobs_finished,
	ADD INDEX sheaf_jobs_finished (kind, completed_at);
`,
	23: `ALTER TABLE sheaf_runs ADD COLUMN kinds LONGTEXT;`,
	24: `ALTER TABLE sheaf_runs ADD COLUMN slow LONGTEXT;`,
	25: `
-- Nothing: the version tunes how PostgreSQL vacuums the jobs table.
`,
	26: `
-- No index of leases: MariaDB has no partial indexes, so every job had an
-- entry in it, moved by each claim and completion, for the few whose lease
-- runs. The rescue and a runner's lease renewal find those among the
-- PROCESSING jobs, through the index by status (sheaf_jobs_failed until
-- now, which served FAILED and CANCELLED jobs). A bulk insert spends a
-- twelfth less of the server's time.
ALTER TABLE sheaf_jobs
	DROP INDEX sheaf_jobs_lease,
	RENAME INDEX sheaf_jobs_failed TO sheaf_jobs_status;
`,
}

const mysqlMigrationsTable = `CREATE TABLE IF NOT EXISTS sheaf_migrations (
	version    INT         NOT NULL PRIMARY KEY,
	applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB;`

func (*mysql) Migrations() []string { return migrationList(mysqlMigrationsTable, mysqlMigrations) }

// statements splits a migration into its statements, which the driver
// runs one at a time: each ends a line with a semicolon.
func statements(up string) []string {
	var out []string
	for st := range strings.SplitSeq(up, ";\n") {
		var lines []string
		for l := range strings.SplitSeq(st, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, "\n"))
		}
	}
	return out
}

// mysqlMigrateLock is how long Migrate waits for another process's
// migration, in seconds.
const mysqlMigrateLock = 60

// Migrate applies the versions one statement at a time: MariaDB commits
// DDL as it runs it, so a transaction would not hold them together. A
// named lock, held by one connection, makes processes that migrate at once
// take turns; each version is recorded once its statements have run.
func (s *mysql) Migrate(ctx context.Context) (found int, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.sheaf_migrations'), ?)", mysqlMigrateLock).Scan(&got); err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("lock: another process has been migrating for %d s", mysqlMigrateLock)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.sheaf_migrations'))")
	}()
	if _, err := conn.ExecContext(ctx, mysqlMigrationsTable); err != nil {
		return 0, err
	}
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&found); err != nil {
		return 0, err
	}
	ups := s.Migrations()
	gdb := s.gdb.WithContext(ctx)
	if err := checkTables(gdb, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ?",
		ups, found); err != nil {
		return found, err
	}
	for v := found + 1; v <= SchemaVersion; v++ {
		for _, st := range statements(ups[v-1]) {
			if strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS sheaf_migrations") {
				continue
			}
			if _, err := conn.ExecContext(ctx, st); err != nil {
				return found, fmt.Errorf("to version %d: %w", v, err)
			}
		}
	}
	return found, nil
}

func (s *mysql) Preflight(ctx context.Context) (version, room int, err error) {
	if err := s.db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&version); err != nil {
		return 0, 0, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT @@max_connections - (SELECT count(*) FROM information_schema.processlist)`).Scan(&room)
	return version, room, err
}

// Analyze refreshes the index statistics of the jobs table.
func (s *mysql) Analyze(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "ANALYZE TABLE sheaf_jobs")
	if err != nil {
		return err
	}
	return rows.Close()
}
