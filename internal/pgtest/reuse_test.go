package pgtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// versioned is a migration that records its version, as the queue's do,
// and makes a table with an identity column; it counts its runs.
func versioned(runs *atomic.Int32) pgtest.Migrate {
	return func(db *gorm.DB) error {
		runs.Add(1)
		return db.Exec(`CREATE TABLE versions (v int, at timestamptz NOT NULL DEFAULT clock_timestamp());
			INSERT INTO versions (v) VALUES (1);
			CREATE TABLE items (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
			CREATE INDEX items_name ON items (name)`).Error
	}
}

// exists reports whether schema is on the shared server.
func exists(t *testing.T, schema string) bool {
	t.Helper()
	return pgtest.New(t).Count(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) == 1
}

// The next test of a key gets the schema the last one left, emptied: its
// rows gone but for the migration's own, its identities starting at 1, and
// nothing migrated again.
func TestMigratedSchemaIsReusedEmpty(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	migrate, key := versioned(&runs), t.Name()
	var first string
	for i := range 3 {
		t.Run("test", func(t *testing.T) {
			db := pgtest.NewMigrated(t, key, migrate)
			if i == 0 {
				first = db.Schema
			}
			require.Equal(t, first, db.Schema)
			require.Zero(t, db.Count(t, "SELECT count(*) FROM items"))
			require.Equal(t, int64(1), db.Count(t, "SELECT count(*) FROM versions WHERE v = 1"))
			var id int64
			require.NoError(t, db.SQL.QueryRow("INSERT INTO items (name) VALUES ('a'), ('b') RETURNING id").Scan(&id))
			require.Equal(t, int64(1), id)
		})
	}
	require.Equal(t, int32(1), runs.Load())
}

// Tables a test made beside the migration's are dropped, with what hangs
// on them, and the schema is reused.
func TestTestsOwnTablesAreDroppedAndTheSchemaReused(t *testing.T) {
	t.Parallel()
	runs := inTurn(t, func(t *testing.T, db *pgtest.DB) {
		require.NoError(t, db.Gorm.Exec(`CREATE TABLE ledger (id bigint GENERATED ALWAYS AS IDENTITY, n int);
			CREATE TABLE "Odd name" (a int); CREATE INDEX ledger_n ON ledger (n);
			CREATE VIEW ledger_view AS SELECT n FROM ledger;
			INSERT INTO ledger (n) VALUES (1); INSERT INTO items (name) VALUES ('a')`).Error)
	}, func(t *testing.T, db *pgtest.DB, first string) {
		require.Equal(t, first, db.Schema)
		require.Zero(t, db.Count(t, "SELECT count(*) FROM pg_class WHERE relnamespace = $1::text::regnamespace "+
			"AND relname IN ('ledger', 'Odd name', 'ledger_n', 'ledger_view', 'ledger_id_seq')", db.Schema))
		require.Zero(t, db.Count(t, "SELECT count(*) FROM items"))
	})
	require.Equal(t, int32(1), runs)
}

// inTurn runs two tests of a key of its own, one after the other, on the
// schemas NewMigrated gives them: first, then next, which is told first's
// schema. It returns how many times the key was migrated.
func inTurn(t *testing.T, first func(t *testing.T, db *pgtest.DB), next func(t *testing.T, db *pgtest.DB, firstSchema string)) int32 {
	t.Helper()
	var runs atomic.Int32
	migrate, key := versioned(&runs), t.Name()
	var schema string
	t.Run("first", func(t *testing.T) {
		db := pgtest.NewMigrated(t, key, migrate)
		schema = db.Schema
		first(t, db)
	})
	t.Run("next", func(t *testing.T) { next(t, pgtest.NewMigrated(t, key, migrate), schema) })
	return runs.Load()
}

// A schema that a test changed, or whose migration rows it changed, or to
// which it left a connection open, is dropped, and the next test gets a
// newly migrated one.
func TestChangedSchemaIsNotReused(t *testing.T) {
	t.Parallel()
	parent := t
	cases := map[string]func(t *testing.T, db *pgtest.DB){
		"a column added": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec("ALTER TABLE items ADD COLUMN extra int").Error)
		},
		"an index dropped": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec("DROP INDEX items_name").Error)
		},
		"a function made": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'").Error)
		},
		"a trigger made": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec(`CREATE FUNCTION g() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
				CREATE TRIGGER items_g BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION g()`).Error)
		},
		"a table made that a migrated one refers to": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec(`CREATE TABLE kinds (name text PRIMARY KEY);
				ALTER TABLE items ADD CONSTRAINT items_kind FOREIGN KEY (name) REFERENCES kinds (name)`).Error)
		},
		"a migration row changed": func(t *testing.T, db *pgtest.DB) {
			require.NoError(t, db.Gorm.Exec("UPDATE versions SET v = 2").Error)
		},
		"a connection left open": func(t *testing.T, db *pgtest.DB) {
			conn, err := pgx.Connect(context.Background(), db.DSN)
			require.NoError(t, err)
			// Closed after the schema was given back: by the parent test.
			parent.Cleanup(func() { _ = conn.Close(context.Background()) })
			_, err = conn.Exec(context.Background(), "SELECT * FROM items")
			require.NoError(t, err)
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runs := inTurn(t, change, func(t *testing.T, db *pgtest.DB, first string) {
				require.NotEqual(t, first, db.Schema)
				require.False(t, exists(t, first), "the changed schema is dropped")
			})
			require.Equal(t, int32(2), runs)
		})
	}
}

// The next test of a key gets the last one's pool of connections with
// the schema, sized afresh, its idle connections still open; a pool the
// test closed is not passed on, and the next test gets a working one; a
// test that left a connection in use leaves a schema not reused.
func TestPoolIsReusedWithTheSchema(t *testing.T) {
	t.Parallel()
	parent := t
	var runs atomic.Int32
	migrate, key := versioned(&runs), t.Name()
	backend := func(t *testing.T, db *pgtest.DB) int64 { return db.Count(t, "SELECT pg_backend_pid()") }
	var first *pgtest.DB
	var pid int64
	t.Run("first", func(t *testing.T) {
		first = pgtest.NewMigrated(t, key, migrate)
		pid = backend(t, first)
		first.SQL.SetMaxOpenConns(1)
	})
	t.Run("parked", func(t *testing.T) {
		db := pgtest.NewMigrated(t, key, migrate)
		require.Same(t, first, db)
		require.Equal(t, pid, backend(t, db), "the same connection")
		require.Equal(t, 20, db.SQL.Stats().MaxOpenConnections)
		require.NoError(t, db.SQL.Close())
	})
	t.Run("after a closed pool", func(t *testing.T) {
		db := pgtest.NewMigrated(t, key, migrate)
		require.Equal(t, first.Schema, db.Schema)
		require.NotSame(t, first, db)
		pid = backend(t, db)
		conn, err := db.SQL.Conn(context.Background())
		require.NoError(t, err)
		// Given back after the schema: by the parent test.
		parent.Cleanup(func() { _ = conn.Close() })
	})
	t.Run("after a connection left in use", func(t *testing.T) {
		db := pgtest.NewMigrated(t, key, migrate)
		require.NotEqual(t, first.Schema, db.Schema)
		require.Zero(t, db.SQL.Stats().InUse)
		require.NotEqual(t, pid, backend(t, db))
	})
}

// Tests of a key that run at once get schemas of their own.
func TestParallelTestsGetSchemasOfTheirOwn(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	migrate, key := versioned(&runs), t.Name()
	var names [2]string
	var both sync.WaitGroup
	both.Add(len(names))
	t.Run("group", func(t *testing.T) {
		for i := range names {
			t.Run("test", func(t *testing.T) {
				t.Parallel()
				names[i] = pgtest.NewMigrated(t, key, migrate).Schema
				// Hold the schema until the other test has one.
				both.Done()
				both.Wait()
			})
		}
	})
	require.NotEqual(t, names[0], names[1])
	require.Equal(t, int32(2), runs.Load())
}

// The schemas a process kept are dropped as it ends: the test binary runs
// TestKeptSchemaChild as a child, which names the schema it used.
func TestKeptSchemasAreDroppedAtExit(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "schema")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKeptSchemaChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=TestKeptSchemaChild", "SHEAF_PGTEST_SCHEMA_FILE="+file)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NotEmpty(t, b)
	require.False(t, exists(t, string(b)), "schema %s outlived its process", b)
}

// TestKeptSchemaChild is TestKeptSchemasAreDroppedAtExit's child process;
// in a normal run it does nothing.
func TestKeptSchemaChild(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("runs as a child process of TestKeptSchemasAreDroppedAtExit")
	}
	var runs atomic.Int32
	var schema string
	t.Run("uses", func(t *testing.T) { schema = pgtest.NewMigrated(t, "child", versioned(&runs)).Schema })
	require.True(t, exists(t, schema), "kept after its test")
	require.NoError(t, os.WriteFile(os.Getenv("SHEAF_PGTEST_SCHEMA_FILE"), []byte(schema), 0o600))
}

// A process that dropped many schemas vacuums the catalogs they filled as
// it ends, for a server that runs no autovacuum.
func TestChurnedCatalogsAreVacuumedAtExit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var before time.Time
	require.NoError(t, db.SQL.QueryRow(`SELECT now()`).Scan(&before))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChurnChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=TestChurnChild")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var last *time.Time
	require.NoError(t, db.SQL.QueryRow(`SELECT last_vacuum FROM pg_stat_sys_tables WHERE relid = 'pg_attribute'::regclass`).Scan(&last))
	require.NotNil(t, last, "pg_attribute was never vacuumed")
	require.True(t, last.After(before), "pg_attribute last vacuumed at %s, before the child began", last)
}

// TestChurnChild is TestChurnedCatalogsAreVacuumedAtExit's child process:
// it makes and drops twenty schemas. In a normal run it does nothing.
func TestChurnChild(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("runs as a child process of TestChurnedCatalogsAreVacuumedAtExit")
	}
	for range 20 {
		t.Run("schema", func(t *testing.T) { pgtest.New(t) })
	}
}
