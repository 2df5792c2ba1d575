// Package store holds the queue's SQL: its schema and migrations, and the
// statements the client and the runner run.
//
// The queue's tables live in the schema of the connection's search_path.
package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// JobsTable is the jobs table's name.
const JobsTable = "sheaf_jobs"

// JobColumnNames are the columns a read of whole jobs selects, those of
// queue.JobRecord. They are named rather than *: PostgreSQL keeps the
// statements a connection has prepared, and one whose result * made fails
// once, with "cached plan must not change result type" (SQLSTATE 0A000),
// when a migration adds a column under it. Named, the result keeps its
// shape, and processes still running the release before a migration keep
// working through it.
var JobColumnNames = []string{"id", "kind", "queue", "status", "priority", "payload", "idempotency_key",
	"correlation_id", "attempts", "max_attempts", "claims", "rescues", "run_at", "locked_until", "locked_by",
	"created_at", "started_at", "completed_at", "processed", "total", "last_error", "auth", "run_id", "period",
	"parent_ids", "output", "meta", "limit_key"}

// jobColumns lists JobColumnNames for a SELECT, with meta read from
// version 6's metadata column (as oldMeta converts it) for the jobs
// enqueued before version 7.
func jobColumns(oldMeta string) string {
	cols := slices.Clone(JobColumnNames)
	cols[slices.Index(cols, "meta")] = "coalesce(meta, " + oldMeta + ") AS meta"
	return strings.Join(cols, ", ")
}

var (
	pgJobColumns     = jobColumns("convert_to(metadata::text, 'UTF8')")
	sqliteJobColumns = jobColumns("CAST(metadata AS BLOB)")
)

// migrations are applied in order, each once, each in its own transaction.
// Never edit one that has shipped: append a new one.
var migrations = []string{
	1: `
CREATE TABLE sheaf_jobs (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind            text        NOT NULL,
	queue           text        NOT NULL DEFAULT 'default',
	status          text        NOT NULL DEFAULT 'QUEUED'
	                CHECK (status IN ('QUEUED', 'PROCESSING', 'COMPLETED', 'FAILED', 'CANCELLED')),
	priority        smallint    NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
	payload         jsonb       NOT NULL DEFAULT '{}',
	idempotency_key text,
	correlation_id  text,
	attempts        integer     NOT NULL DEFAULT 0,
	max_attempts    integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	backoff         jsonb,
	run_at          timestamptz NOT NULL DEFAULT now(),
	locked_until    timestamptz,
	locked_by       text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	started_at      timestamptz,
	completed_at    timestamptz,
	processed       bigint      NOT NULL DEFAULT 0,
	total           bigint,
	last_error      text,
	auth            jsonb
);
-- The claim query walks this index in order and stops at its LIMIT; only
-- claimable rows are in it.
CREATE INDEX sheaf_jobs_claim ON sheaf_jobs (queue, priority DESC, run_at, id) WHERE status = 'QUEUED';
-- The rescuer finds expired leases here. Only PROCESSING jobs hold a lease,
-- but the predicate names locked_until, not status: then no statement that
-- guards on status = 'PROCESSING' can mistake this index for a cheap way to
-- its rows (it is full of dead entries on a busy queue).
CREATE INDEX sheaf_jobs_lease ON sheaf_jobs (locked_until) WHERE locked_until IS NOT NULL;
CREATE UNIQUE INDEX sheaf_jobs_idempotency ON sheaf_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX sheaf_jobs_correlation ON sheaf_jobs (correlation_id) WHERE correlation_id IS NOT NULL;
-- Every transition rewrites a row, so a busy queue makes dead rows fast;
-- vacuum and analyze it far sooner than the server's defaults would.
ALTER TABLE sheaf_jobs SET (
	fillfactor = 70,
	autovacuum_vacuum_scale_factor = 0.02,
	autovacuum_analyze_scale_factor = 0.02,
	autovacuum_vacuum_cost_delay = 0
);
`,
	2: `
-- Runs, periods and dependencies: a schedule's tick stamps its jobs with a
-- run ID and a period; a dependency rule's child records its parents; a job
-- may leave an output for its children.
ALTER TABLE sheaf_jobs
	ADD COLUMN run_id     text,
	ADD COLUMN period     text,
	ADD COLUMN parent_ids bigint[],
	ADD COLUMN output     jsonb;
CREATE INDEX sheaf_jobs_run ON sheaf_jobs (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX sheaf_jobs_period ON sheaf_jobs (period, kind) WHERE period IS NOT NULL;
-- The review compares a run's durations with each kind's recent history.
CREATE INDEX sheaf_jobs_history ON sheaf_jobs (kind, completed_at) WHERE status = 'COMPLETED';
-- One row per schedule: the last tick whose jobs were created. A tick is
-- claimed by locking the row, so one process creates each tick's jobs.
CREATE TABLE sheaf_schedules (
	name       text PRIMARY KEY,
	last_tick  timestamptz NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
`,
	3: `
-- Claims name attempts: each claim of a job has its own number, so that a
-- late result of an earlier claim is refused even when that claim's attempt
-- was not counted (see rescues). Jobs held by runners during the upgrade keep
-- the number their runners know them by.
ALTER TABLE sheaf_jobs
	ADD COLUMN claims  integer NOT NULL DEFAULT 0,
	ADD COLUMN rescues integer NOT NULL DEFAULT 0;
UPDATE sheaf_jobs SET claims = attempts WHERE status = 'PROCESSING';
-- A job rescued from a runner that died is a suspect until one of its
-- attempts finishes: runners take suspects one at a time, from an index of
-- their own, and ordinary claims never step over them.
DROP INDEX sheaf_jobs_claim;
CREATE INDEX sheaf_jobs_claim ON sheaf_jobs (queue, priority DESC, run_at, id) WHERE status = 'QUEUED' AND rescues = 0;
CREATE INDEX sheaf_jobs_suspect ON sheaf_jobs (priority DESC, run_at, id) WHERE status = 'QUEUED' AND rescues > 0;
`,
	4: `
-- Queues paused by hand: runners read the paused ones at every poll, and
-- at once when notified on sheaf_queues. A resumed queue keeps its row,
-- paused_at NULL.
CREATE TABLE sheaf_queues (
	name       text        PRIMARY KEY,
	paused_at  timestamptz,
	updated_at timestamptz NOT NULL DEFAULT now()
);
-- The attempts that did not complete (retried, failed, cancelled while
-- running, rescued), written by the statements that end them, the last 20
-- of each job. An attempt that completes, or is running, is read from the
-- job's row: completions write nothing more.
CREATE TABLE sheaf_attempts (
	job_id      bigint      NOT NULL,
	claim       integer     NOT NULL,
	runner      text,
	started_at  timestamptz,
	finished_at timestamptz NOT NULL DEFAULT now(),
	outcome     text        NOT NULL,
	error       text,
	PRIMARY KEY (job_id, claim)
);
-- Runners that are up: each writes its row as it starts and at every lease
-- renewal, and deletes it as it stops. queues is a JSON array.
CREATE TABLE sheaf_runners (
	id         text        PRIMARY KEY,
	queues     text        NOT NULL,
	workers    integer     NOT NULL,
	started_at timestamptz NOT NULL DEFAULT now(),
	seen_at    timestamptz NOT NULL DEFAULT now()
);
-- What operators did to the queue, as an application records it.
CREATE TABLE sheaf_audit (
	id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at      timestamptz NOT NULL DEFAULT now(),
	actor   text        NOT NULL,
	action  text        NOT NULL,
	target  jsonb,
	result  text        NOT NULL,
	changed bigint      NOT NULL DEFAULT 0
);
`,
	5: `
-- Failed and cancelled jobs, newest first (the console's "failed jobs"),
-- walked backwards with the kind or the queue as a filter: the primary key
-- would step over every newer job of another status (the queued ones), and
-- no other index holds these statuses. Only jobs that end this way enter
-- it, so enqueues, claims and completions do not pay for it. Built in the
-- migration's transaction, it holds writes back for as long as it takes.
CREATE INDEX sheaf_jobs_failed ON sheaf_jobs (status, id) WHERE status IN ('FAILED', 'CANCELLED');
`,
	6: `
-- Metadata carried with a job from its enqueue to its attempts, a JSON
-- object of strings: the W3C trace context (traceparent, tracestate) of
-- the call that enqueued it, or of the parents that released it. NULL for
-- jobs enqueued without any, so a queue without telemetry stores nothing.
ALTER TABLE sheaf_jobs ADD COLUMN metadata jsonb;
`,
	7: `
-- Metadata as bytes, in a column of its own (see the store's
-- EncodeMetadata): a traceparent, which most jobs that have metadata carry
-- and nothing else, takes 26 bytes instead of some 80 of JSON, in every
-- version of the row. Version 6's metadata column stays, as it is: claims
-- read it for the jobs enqueued before, and processes of version 6 that
-- still run during an upgrade keep writing it. Adding a column takes no
-- time and rewrites no row.
ALTER TABLE sheaf_jobs ADD COLUMN meta bytea;
`,
	8: `
-- The runner that leads the maintenance (rescue of expired leases, and the
-- upkeep that must run once however many runners there are): a row per
-- leadership, taken by a runner when it is free or has expired (by the
-- server's clock), renewed by its holder well before it expires, and
-- deleted by its holder as it stops, so that another takes over at once.
CREATE TABLE sheaf_leader (
	name       text        PRIMARY KEY,
	holder     text        NOT NULL,
	elected_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL
);
`,
	9: `
-- Day roll-ups of finished jobs, one row per UTC day, kind and queue, so
-- that history outlives the rows the pruner deletes: counts by outcome,
-- retries, run times of completed jobs (microseconds) and failures by
-- error shape (a JSON object of counts).
CREATE TABLE sheaf_history (
	day       date   NOT NULL,
	kind      text   NOT NULL,
	queue     text   NOT NULL,
	completed bigint NOT NULL DEFAULT 0,
	failed    bigint NOT NULL DEFAULT 0,
	cancelled bigint NOT NULL DEFAULT 0,
	retries   bigint NOT NULL DEFAULT 0,
	p50_us    bigint NOT NULL DEFAULT 0,
	p95_us    bigint NOT NULL DEFAULT 0,
	max_us    bigint NOT NULL DEFAULT 0,
	errors    jsonb,
	PRIMARY KEY (day, kind, queue)
);
-- One row: the first day whose roll-up is not final. The pruner deletes
-- only jobs that finished before it.
CREATE TABLE sheaf_rollup (
	id           integer PRIMARY KEY CHECK (id = 1),
	final_before date    NOT NULL
);
-- Finished jobs by the time they finished: what roll-ups read a day of,
-- and what the pruner walks from the oldest.
CREATE INDEX sheaf_jobs_finished ON sheaf_jobs (completed_at) WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED');
-- Audit entries that target one job, which go with it.
CREATE INDEX sheaf_audit_job ON sheaf_audit ((target ->> 'job')) WHERE target ->> 'job' IS NOT NULL;
`,
	10: `
-- Alerts (package queue/alert). An episode is one stretch of time during
-- which a rule's condition held for one key (a job, a run, a queue): it is
-- pending until the condition has held long enough, firing, then
-- resolved; "once" marks what happens once per key, such as a day's
-- digest. At most one open episode per rule and key.
CREATE TABLE sheaf_alert_episodes (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	rule        text        NOT NULL,
	key         text        NOT NULL,
	state       text        NOT NULL CHECK (state IN ('pending', 'firing', 'resolved', 'once')),
	kind        text        NOT NULL DEFAULT '',
	queue       text        NOT NULL DEFAULT '',
	summary     text        NOT NULL DEFAULT '',
	started_at  timestamptz NOT NULL,
	fired_at    timestamptz,
	notified    boolean     NOT NULL DEFAULT false,
	resolved_at timestamptz
);
CREATE UNIQUE INDEX sheaf_alert_episodes_open ON sheaf_alert_episodes (rule, key) WHERE state <> 'resolved';
-- A notification to one sink, recorded with the change of episode it
-- announces and deleted from the queue of work by sent_at: sent at least
-- once, under its event ID every time.
CREATE TABLE sheaf_alert_notices (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id   text        NOT NULL,
	episode_id bigint,
	sink       text        NOT NULL,
	body       bytea       NOT NULL,
	created_at timestamptz NOT NULL,
	next_at    timestamptz NOT NULL,
	attempts   integer     NOT NULL DEFAULT 0,
	last_error text,
	sent_at    timestamptz,
	UNIQUE (event_id, sink)
);
CREATE INDEX sheaf_alert_notices_due ON sheaf_alert_notices (next_at) WHERE sent_at IS NULL;
-- Silences: no notification for the episodes of a rule (of a kind, of a
-- queue) until a time.
CREATE TABLE sheaf_alert_silences (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	rule       text        NOT NULL,
	kind       text        NOT NULL DEFAULT '',
	queue      text        NOT NULL DEFAULT '',
	until      timestamptz NOT NULL,
	actor      text        NOT NULL DEFAULT '',
	reason     text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL
);
`,
	11: `
-- The tick ledger: one row per expected tick of a schedule, written in the
-- transaction that fires the tick (fired, or late: fired after its time by
-- more than the schedule's grace) or that skips it (missed). A schedule's
-- rows older than 400 days are deleted as it fires.
CREATE TABLE sheaf_ticks (
	schedule    text        NOT NULL,
	at          timestamptz NOT NULL,
	outcome     text        NOT NULL CHECK (outcome IN ('fired', 'late', 'missed')),
	recorded_at timestamptz NOT NULL,
	run_id      text        NOT NULL,
	jobs        integer     NOT NULL DEFAULT 0,
	PRIMARY KEY (schedule, at)
);
-- Reviews read the ticks of a time range, across schedules.
CREATE INDEX sheaf_ticks_at ON sheaf_ticks (at);
-- When a runner first started the schedule: its last_tick is then where it
-- counts ticks from (the start, less the grace), not a tick.
ALTER TABLE sheaf_schedules ADD COLUMN started_at timestamptz;
`,
	12: `
-- One row per run, written with the run's first job (by the statements that
-- insert jobs), so that a list of runs reads a page of runs rather than
-- grouping every job. Once every job of a run has finished, the leader's
-- runs roll-up keeps the run's counts by status here (a JSON object): the
-- list reads them instead of counting, and they outlive the jobs that
-- retention prunes. A job inserted into a finished run, or retried, clears
-- them; max_id, the run's newest job when they were counted, lets a reader
-- see a job inserted while they were being counted.
CREATE TABLE sheaf_runs (
	run_id        text        PRIMARY KEY,
	period        text,
	first_created timestamptz NOT NULL,
	last_created  timestamptz,
	max_id        bigint,
	counts        jsonb
);
CREATE INDEX sheaf_runs_first ON sheaf_runs (first_created DESC, run_id DESC);
CREATE INDEX sheaf_runs_open ON sheaf_runs (first_created) WHERE counts IS NULL;
INSERT INTO sheaf_runs (run_id, period, first_created)
	SELECT run_id, min(period), min(created_at) FROM sheaf_jobs WHERE run_id IS NOT NULL GROUP BY run_id;
-- A run's newest job, and its jobs in order, without visiting them all.
CREATE INDEX sheaf_jobs_run_id ON sheaf_jobs (run_id, id) WHERE run_id IS NOT NULL;
DROP INDEX sheaf_jobs_run;
`,
	13: `
-- The outbox: one row per lifecycle event of a job (created, retrying,
-- completed, failed, cancelled), written by triggers in the transaction of
-- the change, which queue/bridge's relay publishes and then deletes. The
-- triggers exist only while the outbox is on (EnableOutbox creates them):
-- without them the jobs' statements pay nothing. A row copies what its
-- event tells, so an event outlives the pruning of its job.
CREATE TABLE sheaf_outbox (
	id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	job_id         bigint      NOT NULL,
	event          text        NOT NULL,
	kind           text        NOT NULL,
	queue          text        NOT NULL,
	attempts       integer     NOT NULL,
	max_attempts   integer     NOT NULL,
	error          text,
	correlation_id text,
	run_id         text,
	meta           bytea,
	at             timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION sheaf_outbox_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, CASE WHEN TG_OP = 'INSERT' THEN 'created' WHEN NEW.status = 'QUEUED' THEN 'retrying' ELSE lower(NEW.status) END,
		NEW.kind, NEW.queue, NEW.attempts, NEW.max_attempts,
		CASE WHEN TG_OP = 'UPDATE' AND NEW.status IN ('QUEUED', 'FAILED') THEN NEW.last_error END,
		NEW.correlation_id, NEW.run_id, NEW.meta);
	RETURN NULL;
END $$;
`,
	14: `
-- Limits across every runner (claimLimitedSQL enforces them): at most
-- concurrency jobs running at once, and at most rate started per period,
-- in a kind, a queue, or each partition key of a kind (limit_key, which
-- the kind's key function wrote at enqueue). 0 is no limit of that sort. A
-- limit declared at registration has changed_by ''; one an operator set
-- names them, and declarations leave it alone.
ALTER TABLE sheaf_jobs ADD COLUMN limit_key text;
CREATE TABLE sheaf_limits (
	scope       text        NOT NULL CHECK (scope IN ('kind', 'queue', 'key')),
	target      text        NOT NULL,
	concurrency integer     NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
	rate        integer     NOT NULL DEFAULT 0 CHECK (rate >= 0),
	period_ms   bigint      NOT NULL DEFAULT 0 CHECK (period_ms >= 0),
	suspended   boolean     NOT NULL DEFAULT false,
	changed_by  text        NOT NULL DEFAULT '',
	changed_at  timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (scope, target)
);
-- The starts of rate-limited scopes within their period, one row a start,
-- written by the claim that starts them; claims delete what fell out.
CREATE TABLE sheaf_limit_starts (
	scope  text        NOT NULL,
	target text        NOT NULL,
	key    text        NOT NULL,
	at     timestamptz NOT NULL
);
CREATE INDEX sheaf_limit_starts_at ON sheaf_limit_starts (scope, target, at);
`,
	15: `
-- Hour roll-ups of finished jobs, for the activity charts once the jobs are
-- pruned: per hour (UTC), kind and queue, and for all kinds of a queue
-- (kind '') and for everything (kind and queue ''), since percentiles do
-- not add up. The counts and percentiles are those the activity series
-- reads from the jobs (waits and run times in seconds, as percentile_cont
-- gives them); cancelled jobs are counted too.
CREATE TABLE sheaf_hours (
	hour      timestamptz      NOT NULL,
	kind      text             NOT NULL,
	queue     text             NOT NULL,
	completed bigint           NOT NULL DEFAULT 0,
	failed    bigint           NOT NULL DEFAULT 0,
	cancelled bigint           NOT NULL DEFAULT 0,
	wait_p50  double precision NOT NULL DEFAULT 0,
	wait_p95  double precision NOT NULL DEFAULT 0,
	run_p50   double precision NOT NULL DEFAULT 0,
	run_p95   double precision NOT NULL DEFAULT 0,
	PRIMARY KEY (hour, kind, queue)
);
-- One row: the hours whose roll-ups are kept and final, [kept_from,
-- final_before). The pruner deletes only jobs that finished before
-- final_before.
CREATE TABLE sheaf_hours_final (
	id           integer     PRIMARY KEY CHECK (id = 1),
	kept_from    timestamptz NOT NULL,
	final_before timestamptz NOT NULL
);
`,
	// The limited claims in one round trip: see claimFunctions. Never
	// edit it once shipped (TestClaimFunctionsShipped pins its text): a
	// change to the claims installs them again in a version of its own.
	16: fairShareSQL + claimFunctions(16),
	17: `
-- How long a chunked job's latest attempt took over its chunks (see
-- runner.ChunkTimes), written with its progress after every chunk; NULL
-- for other jobs.
ALTER TABLE sheaf_jobs ADD COLUMN chunk_times text;
`,
	18: `
-- When a run's latest job finished, kept by the runs roll-up with its
-- counts, so that a run's wall time outlives its pruned jobs; the runs
-- already counted get theirs from the jobs that are left.
ALTER TABLE sheaf_runs ADD COLUMN last_finished timestamptz;
UPDATE sheaf_runs r SET last_finished = (SELECT max(completed_at) FROM sheaf_jobs j WHERE j.run_id = r.run_id)
	WHERE counts IS NOT NULL;
`,
	19: weightsSQL + claimFunctions(19),
	20: `
-- A run's failed and cancelled jobs, in ID order: the review of a night
-- lists them and groups their errors, which read the run's few failures
-- here rather than every job of the run. The predicate is the one of
-- sheaf_jobs_failed, word for word, as the reads repeat it for SQLite.
CREATE INDEX sheaf_jobs_run_failed ON sheaf_jobs (run_id, id) WHERE status IN ('FAILED', 'CANCELLED');
`,
	// The limited claims keep a plan for any arguments, rather than plan
	// every call: see claimFunctions.
	21: claimFunctions(21),
	22: finishedByKindSQL,
	23: runKindsSQL,
	24: runSlowSQL,
	25: vacuumClaimsSQL,
	26: `
-- Nothing: the version drops MariaDB's index of leases.
`,
}

// vacuumClaimsSQL is schema version 25: vacuum the jobs table after a
// number of changes that does not grow with it, and always clean its
// indexes when it does. A claimed job leaves a dead entry at the head of
// the claim index, where each claim walks until a vacuum removes it: after
// 180,000 jobs on a table of ten million, a claim read 1,100 index pages
// and an idle runner's pickup took 0.81 ms against 0.22 ms once vacuumed.
// At 2% of the table (version 1) such a vacuum waited for 200,000 dead
// rows; and a vacuum that finds dead rows in under 2% of the table's pages
// skips the indexes unless told otherwise, so a large table's claim index
// was not cleaned at all. Now a vacuum follows about 0.5% of the table (at
// most once a minute, autovacuum's pace) and cleans every index.
const vacuumClaimsSQL = `ALTER TABLE sheaf_jobs SET (
	autovacuum_vacuum_scale_factor = 0.005,
	autovacuum_vacuum_threshold = 1000,
	vacuum_index_cleanup = on
);`

// runSlowSQL is schema version 24: a finished run's slow jobs, as a
// review of the run found them (see KeptSlow), so that later reviews read
// one row rather than every completed job of the night. Each names
// the counts it was found with and the thresholds it was found against,
// and is used only while both still hold.
const runSlowSQL = `ALTER TABLE sheaf_runs ADD COLUMN slow jsonb;`

// runKindsSQL is schema version 23: with a finished run's counts by
// status, the runs roll-up keeps its jobs counted by kind and status, each
// with the first time one of them started, as a JSON array of [kind,
// status, count, first start]: the review of the run reads them there
// rather than grouping every job of the night. They are read only while
// counts is set (what clears counts makes them stale); runs whose counts
// were kept before this version have none, and are counted from their
// jobs.
const runKindsSQL = `ALTER TABLE sheaf_runs ADD COLUMN kinds jsonb;`

// finishedByKindSQL is schema version 22: one index of finished jobs, by
// kind and finish time, for what two served before it (sheaf_jobs_history,
// a kind's completed jobs by finish time, and sheaf_jobs_finished, every
// finished job by finish time). A completion entered both; one entry fewer
// per job is a seventh of a completion's write-ahead log and some 4% of the
// server's time per job. Reads by time across kinds name the kinds (see
// keeping.isFinished), and so does the pruner's walk (keeping.candidates).
const finishedByKindSQL = `
DROP INDEX sheaf_jobs_history;
DROP INDEX sheaf_jobs_finished;
CREATE INDEX sheaf_jobs_finished ON sheaf_jobs (kind, completed_at) WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED');
`

// weightsSQL is schema version 19's weights of fair share: a key of
// weight 3 gets three claims to a key of weight 1's one (see weightedTurn);
// a key without a row weighs 1. The version installs the claim functions
// again, weighted. The rows are those of the ScopeKey limit
// of the kind target, written and deleted with it.
const weightsSQL = `
CREATE TABLE sheaf_limit_weights (
	target    text    NOT NULL,
	limit_key text    NOT NULL,
	weight    integer NOT NULL CHECK (weight >= 1),
	PRIMARY KEY (target, limit_key)
);
`

// fairShareSQL is schema version 16's fair share: a ScopeKey limit may
// make claims take turns among its kind's keys, and each key's queued jobs
// are found in claim order through an index of their own (see fairSQL).
const fairShareSQL = `
ALTER TABLE sheaf_limits ADD COLUMN fair boolean NOT NULL DEFAULT false;
CREATE INDEX sheaf_jobs_keyed ON sheaf_jobs (kind, limit_key, priority DESC, run_at, id)
	WHERE status = 'QUEUED' AND limit_key IS NOT NULL;
`

// SchemaVersion is the schema version this release of sheaf migrates to.
const SchemaVersion = 26

// createMigrationsTable records which versions a schema has.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS sheaf_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
);`

// Migrations returns, in order, the SQL of every schema version from 1 to
// SchemaVersion; each records its version in the migrations table, which
// version 1 creates.
func (*postgres) Migrations() []string { return pgMigrations() }

func pgMigrations() []string { return migrationList(createMigrationsTable, migrations) }

// migrationList returns, in order, the SQL of every schema version from 1
// to SchemaVersion of a store whose versions are ups and whose migrations
// table table creates: version 1 creates it first, and each version
// records itself in it.
func migrationList(table string, ups []string) []string {
	out := make([]string, 0, SchemaVersion)
	for v := 1; v <= SchemaVersion; v++ {
		up := ups[v]
		if v == 1 {
			up = "\n" + table + up
		}
		out = append(out, up+fmt.Sprintf("INSERT INTO sheaf_migrations (version) VALUES (%d);\n", v))
	}
	return out
}

// migrationLock takes the lock Migrate holds while it works on PostgreSQL.
const migrationLock = "SELECT pg_advisory_xact_lock(hashtext('sheaf_migrations:' || current_schema()))"

// Migrate brings the schema up to SchemaVersion by applying the versions
// Migrations returns, and returns the version it found. A schema newer than
// SchemaVersion is left as it is. Migrate holds a transaction-level
// advisory lock named after the schema, so processes that migrate the same
// schema at the same time run one after the other, and every later one
// finds nothing to do; queues in other schemas of the database migrate
// beside it (their tables, functions and triggers are their schema's own).
func (s *postgres) Migrate(ctx context.Context) (found int, err error) {
	err = s.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(migrationLock).Error; err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := tx.Exec(createMigrationsTable).Error; err != nil {
			return err
		}
		if err := tx.Raw("SELECT coalesce(max(version), 0) FROM sheaf_migrations").Scan(&found).Error; err != nil {
			return err
		}
		ups := s.Migrations()
		if err := checkTables(tx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ?",
			ups, found); err != nil {
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

// Notifications are database-wide, but a queue lives in a schema: every
// payload starts with the schema, and runners ignore other schemas', so two
// applications (or tenants) in one database never wake or cancel each
// other's jobs.
//
// notifyDue returns a query that notifies runners of the queues that got
// jobs due now in rel, a relation with queue, priority, run_at, status and
// rescues columns: one notification per queue, carrying the highest due
// priority ("schema:queue:priority"), so a runner knows whether to look above
// where it is (see the claim statements), and one more if suspects became due
// ("schema:queue:s"). It yields one row, the number of notifications.
func notifyDue(rel string) string {
	return `SELECT count(pg_notify('sheaf_jobs', current_schema() || ':' || queue || ':' ||
		CASE WHEN suspects THEN 's' ELSE top::text END)) AS notified FROM (
		SELECT queue, rescues > 0 AS suspects, max(priority) AS top FROM ` + rel + `
		WHERE status = 'QUEUED' AND run_at <= now() GROUP BY 1, 2) due`
}
