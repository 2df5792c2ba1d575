package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// schemaOf describes a schema's tables as the catalog has them: columns
// with their types, defaults and nullability, constraints, indexes, table
// options, and the versions recorded. Two schemas built the same way
// describe the same, but for their names.
func schemaOf(t *testing.T, db *pgtest.DB) string {
	t.Helper()
	var lines []string
	rows, err := db.SQL.Query(`
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
	CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
	coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') ||
	CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
UNION ALL
SELECT 'index ' || replace(indexdef, current_schema() || '.', '') FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT 'options ' || relname || ' ' || coalesce(array_to_string(reloptions, ','), '')
FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'
UNION ALL
SELECT 'version ' || version FROM sheaf_migrations
ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// The SQL that Migrations hands to a team's own migration tool, applied by
// hand, one version per transaction, gives the schema that Migrate gives,
// and a runner starts on it.
func TestMigrationsAppliedByHandMatchMigrate(t *testing.T) {
	pgtest.PostgresOnly(t, "it compares PostgreSQL's catalogs")
	t.Parallel()
	byMigrate := newEnv(t, basic(t))

	byHand := pgtest.New(t)
	reg := queue.NewRegistry()
	basic(t)(reg)
	c, err := queue.NewClient(byHand.Gorm, reg, quiet())
	require.NoError(t, err)
	ms := c.Migrations()
	require.Len(t, ms, queue.SchemaVersion)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		tx, err := byHand.SQL.Begin()
		require.NoError(t, err)
		_, err = tx.Exec(m.Up)
		require.NoError(t, err, "version %d", m.Version)
		require.NoError(t, tx.Commit())
	}
	require.Equal(t, schemaOf(t, byMigrate.db), schemaOf(t, byHand))
	require.Contains(t, schemaOf(t, byHand), "version 5")

	require.NoError(t, c.Migrate(context.Background()), "Migrate finds nothing left to do")
	r, err := queue.NewRunner(c)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	require.NoError(t, r.Stop(context.Background()))
}

// A later release's migration may add a column to the jobs table under
// processes still running this one. PostgreSQL keeps each statement a
// connection has prepared, and one whose result * made fails once when the
// table gains a column; the reads and writes that return whole jobs name
// their columns, so every call keeps working.
func TestCallsKeepWorkingWhenAMigrationAddsAColumn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	sqlDB, err := e.db.Gorm.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // every call on the connection that prepared its statements
	ctx := context.Background()
	calls := func(stage string) {
		t.Helper()
		res, err := e.client.Enqueue(ctx, report{County: stage})
		require.NoError(t, err, stage+": Enqueue")
		id := res.Job.ID
		got, err := e.client.Get(ctx, id)
		require.NoError(t, err, stage+": Get")
		require.Equal(t, id, got.ID)
		list, err := e.client.List(ctx, queue.Filter{AfterID: id - 1, Limit: 1})
		require.NoError(t, err, stage+": List")
		require.Len(t, list, 1)
		rec, err := e.client.Cancel(ctx, id)
		require.NoError(t, err, stage+": Cancel")
		require.Equal(t, queue.StatusCancelled, rec.Status)
		done, err := e.client.Wait(ctx, id)
		require.NoError(t, err, stage+": Wait")
		require.Equal(t, queue.StatusCancelled, done[0].Status)
		rec, err = e.client.Retry(ctx, id)
		require.NoError(t, err, stage+": Retry")
		require.Equal(t, queue.StatusQueued, rec.Status)
		_, err = e.client.Children(ctx, id)
		require.NoError(t, err, stage+": Children")
		for _, dup := range []bool{false, true} {
			res, err := e.client.Enqueue(ctx, noop{}, queue.IdempotencyKey("key-"+stage))
			require.NoError(t, err, stage+": Enqueue with a key")
			require.Equal(t, dup, res.Duplicate)
		}
		cancelled, err := e.client.CancelMatching(ctx, queue.Filter{Kinds: []string{"noop"}})
		require.NoError(t, err, stage+": CancelMatching")
		require.Positive(t, cancelled)
		_, err = e.client.Review(ctx, queue.ReviewQuery{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
		require.NoError(t, err, stage+": Review")
		many, err := e.client.EnqueueMany(ctx, []queue.Params{{Args: report{County: stage}}, {Args: noop{}}})
		require.NoError(t, err, stage+": EnqueueMany")
		require.Len(t, many, 2)
		n, err := e.client.EnqueueBulk(ctx, []queue.Params{{Args: report{County: stage}}})
		require.NoError(t, err, stage+": EnqueueBulk")
		require.Equal(t, int64(1), n)
	}
	calls("before")
	require.NoError(t, e.db.Gorm.Exec("ALTER TABLE sheaf_jobs ADD COLUMN added_later integer").Error)
	calls("after")
}

// The columns that reads of whole jobs name are JobRecord's.
func TestJobColumnsAreJobRecordsFields(t *testing.T) {
	s, err := schema.Parse(&queue.JobRecord{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	require.ElementsMatch(t, s.DBNames, store.JobColumnNames)
}

// Migrate warns when it upgrades a schema under runners that are up, which
// run an earlier release, and names them; not when the schema is current.
func TestMigrateWarnsOfRunnersOfAnEarlierRelease(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	reg := queue.NewRegistry()
	logs := newLogs(slog.LevelWarn)
	c, err := queue.NewClient(db.Gorm, reg, logs.option())
	require.NoError(t, err)
	for _, m := range c.Migrations()[:6] {
		require.NoError(t, db.Gorm.Exec(m.Up).Error)
	}
	now := db.Now(t)
	require.NoError(t, db.Gorm.Exec(`INSERT INTO sheaf_runners (id, queues, workers, started_at, seen_at) VALUES
		('old-1', '["default"]', 10, ?, ?), ('gone', '["default"]', 10, ?, ?)`,
		db.Time(now), db.Time(now), db.Time(now.Add(-time.Hour)), db.Time(now.Add(-time.Hour))).Error)
	const msg = "queue: migrating the schema under runners of an earlier release; replace them once it is done " +
		"(those of schema version 6 should be stopped first)"

	require.NoError(t, c.Migrate(context.Background()))
	n, attrs := logs.count(msg)
	require.Equal(t, 1, n)
	require.Equal(t, "[old-1]", attrs["runners"], "the runner not seen for an hour is not up")
	require.Equal(t, "6", attrs["from"])

	require.NoError(t, c.Migrate(context.Background()))
	n, _ = logs.count(msg)
	require.Equal(t, 1, n, "nothing to say once the schema is current")
}
