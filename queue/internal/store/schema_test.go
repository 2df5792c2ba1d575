package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }

// migrate is the store's Migrate, for pgtest's migrated databases.
func migrate(db *gorm.DB) error {
	st, err := store.Open(db)
	if err == nil {
		_, err = st.Migrate(context.Background())
	}
	return err
}

// Each migration records its own version, so a schema migrated by hand
// says where it stands.
func TestMigrationsRecordTheirVersion(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store, _ *gorm.DB) {
		ups := st.Migrations()
		require.Len(t, ups, store.SchemaVersion)
		for i, up := range ups {
			require.True(t, strings.HasSuffix(up, fmt.Sprintf("INSERT INTO sheaf_migrations (version) VALUES (%d);\n", i+1)), "version %d", i+1)
		}
		require.Contains(t, ups[0], "CREATE TABLE IF NOT EXISTS sheaf_migrations")
	})
}

// Migrate reports the version it found and brings the schema to
// SchemaVersion; a second call finds it there and changes nothing.
func TestMigrateReportsWhatItFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		found, err := st.Migrate(ctx)
		require.NoError(t, err)
		require.Zero(t, found)
		found, err = st.Migrate(ctx)
		require.NoError(t, err)
		require.Equal(t, store.SchemaVersion, found)
		var n int64
		require.NoError(t, db.Raw("SELECT count(*) FROM sheaf_migrations").Scan(&n).Error)
		require.Equal(t, int64(store.SchemaVersion), n)
	})
}

// A schema newer than this code is left alone, and Migrate says what it
// found, for the caller to refuse it.
func TestMigrateLeavesANewerSchemaAlone(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.Exec("INSERT INTO sheaf_migrations (version) VALUES (?)", store.SchemaVersion+1).Error)
		found, err := st.Migrate(ctx)
		require.NoError(t, err)
		require.Equal(t, store.SchemaVersion+1, found)
	})
}

// runStores are the stores the store's tests run on: a PostgreSQL schema
// and an SQLite file by default, and only the store SHEAF_TEST_STORE names
// when it names SQLite or MariaDB. The MariaDB cases cost the server some
// 3.5 s of CPU a run (InnoDB creates each test's tables on disk) and the
// package a tenth of its time, so they run in the MariaDB runs
// (SHEAF_TEST_STORE=mysql, a step of CI) rather than in every run.
func runStores() []string {
	switch pgtest.Store() {
	case "sqlite", "mysql":
		return []string{pgtest.Store()}
	}
	return []string{"postgres", "sqlite"}
}

// statements splits a migration into what st runs in one call: MariaDB's
// driver takes one statement at a time.
func statements(st store.Store, up string) []string {
	if st.Dialect() != "mysql" {
		return []string{up}
	}
	var out []string
	for _, s := range strings.Split(up, ";\n") {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// forEachStore runs test, in parallel, on a fresh database of each store
// of the run (runStores).
func forEachStore(t *testing.T, test func(t *testing.T, st store.Store, db *gorm.DB)) {
	eachStore(t, false, test)
}

// forEachMigrated runs test, in parallel, on a migrated database of each
// store of the run.
func forEachMigrated(t *testing.T, test func(t *testing.T, st store.Store, db *gorm.DB)) {
	eachStore(t, true, test)
}

func eachStore(t *testing.T, migrated bool, test func(t *testing.T, st store.Store, db *gorm.DB)) {
	t.Parallel()
	for _, name := range runStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var db *pgtest.DB
			switch {
			case name == "postgres" && migrated:
				db = pgtest.NewMigrated(t, "queue", migrate)
			case name == "postgres":
				db = pgtest.New(t)
			case name == "mysql":
				db = pgtest.NewMySQL(t)
				if migrated {
					require.NoError(t, migrate(db.Gorm))
				}
			case migrated:
				db = pgtest.NewMigratedSQLite(t, "queue", migrate)
			default:
				db = pgtest.NewSQLite(t)
			}
			st, err := store.Open(db.Gorm)
			require.NoError(t, err)
			test(t, st, db.Gorm)
		})
	}
}

// Migrate's lock on PostgreSQL is its schema's: a migration of one schema
// waits for another of the same schema and not for one of another schema
// of the database (test suites and tenants migrate side by side).
func TestMigrateLocksOnlyItsSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	held, other := pgtest.New(t), pgtest.New(t)
	tx := held.Gorm.Begin()
	require.NoError(t, tx.Error)
	defer tx.Rollback()
	require.NoError(t, tx.Exec(store.MigrationLock).Error)

	st, err := store.Open(other.Gorm)
	require.NoError(t, err)
	done, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = st.Migrate(done)
	require.NoError(t, err, "another schema's migration lock held this one up")

	same, err := store.Open(held.Gorm)
	require.NoError(t, err)
	waiting, cancelWait := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelWait()
	_, err = same.Migrate(waiting)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a migration of the held schema did not wait for its lock")
	require.NoError(t, tx.Rollback().Error)
	_, err = same.Migrate(ctx)
	require.NoError(t, err)
}

// migratedPostgres returns a store on a fresh, migrated PostgreSQL database,
// for tests of what only PostgreSQL does.
func migratedPostgres(t *testing.T) (store.Store, *gorm.DB) {
	t.Helper()
	db := pgtest.New(t).Gorm
	st, err := store.Open(db)
	require.NoError(t, err)
	_, err = st.Migrate(context.Background())
	require.NoError(t, err)
	return st, db
}

// On PostgreSQL the jobs table is vacuumed after a number of changes that
// does not grow with it, and each vacuum cleans the indexes: the claim
// index's dead entries, which each claim walks, do not wait for a fiftieth
// of a large table to change.
func TestJobsTableIsVacuumedForItsClaims(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() != "postgres" {
			t.Skip("PostgreSQL's autovacuum")
		}
		var opts []string
		require.NoError(t, db.Raw("SELECT unnest(reloptions) FROM pg_class WHERE oid = 'sheaf_jobs'::regclass").Scan(&opts).Error)
		require.Subset(t, opts, []string{"autovacuum_vacuum_scale_factor=0.005", "autovacuum_vacuum_threshold=1000", "vacuum_index_cleanup=on"})
	})
}
