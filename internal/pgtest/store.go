package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/queue/mysqldb"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// The queue's tests run on one store per run: PostgreSQL, or SQLite when
// SHEAF_TEST_STORE=sqlite, or when no PostgreSQL answers outside CI (so
// that a machine without a server still runs the SQLite half), or MariaDB
// when SHEAF_TEST_STORE=mysql.

var store = sync.OnceValue(func() string {
	switch os.Getenv("SHEAF_TEST_STORE") {
	case "sqlite":
		return "sqlite"
	case "postgres":
		return "postgres"
	case "mysql":
		return "mysql"
	}
	if os.Getenv("CI") == "" && Reachable() != nil {
		return "sqlite"
	}
	return "postgres"
})

// Store returns the store this run's tests use: "postgres", "sqlite" or
// "mysql".
func Store() string { return store() }

// NewDB returns a fresh database on this run's store: a PostgreSQL schema
// (New), an SQLite file in the test's temporary folder, or a MariaDB
// database (NewMySQL).
func NewDB(t testing.TB) *DB {
	t.Helper()
	switch Store() {
	case "postgres":
		return New(t)
	case "mysql":
		return NewMySQL(t)
	}
	return NewSQLite(t)
}

// NewSQLite returns a fresh SQLite database in a file of the test's
// temporary folder, opened as sqlitedb.Open opens it.
func NewSQLite(t testing.TB) *DB {
	t.Helper()
	return openSQLite(t, filepath.Join(t.TempDir(), "sheaf.db"))
}

// openSQLite opens the SQLite file at path as sqlitedb.Open does, until
// the test ends.
func openSQLite(t testing.TB, path string) *DB {
	t.Helper()
	gdb, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return &DB{Schema: "main", DSN: sqlitedb.DSN(path), Gorm: gdb, SQL: sqlDB}
}

// PostgresOnly skips a test that needs PostgreSQL (its SQL, several
// servers' processes, notifications, backends to kill) on an SQLite run.
func PostgresOnly(t testing.TB, why string) {
	t.Helper()
	if Store() != "postgres" {
		t.Skip("PostgreSQL only: " + why)
	}
}

// RowLocks skips a test of row locks (a transaction holds some rows, and
// others wait for them or pass them by) on SQLite, where a writing
// transaction holds the whole database; PostgreSQL and MariaDB lock rows.
func RowLocks(t testing.TB) {
	t.Helper()
	if Store() == "sqlite" {
		t.Skip("row locks: on SQLite, a writing transaction holds the whole database")
	}
}

// OpenDSN opens a gorm handle on a DSN that New or NewSQLite made, as
// another process would: an SQLite DSN (sqlitedb.DSN) starts with "file:",
// and its file is opened with sqlitedb.Open.
func OpenDSN(dsn string, config ...gorm.Option) (*gorm.DB, error) {
	config = append([]gorm.Option{&gorm.Config{Logger: logger.Discard}}, config...)
	if path, ok := strings.CutPrefix(dsn, "file:"); ok {
		path, _, _ = strings.Cut(path, "?")
		return sqlitedb.Open(path, config...)
	}
	if strings.HasPrefix(dsn, "mysql://") {
		return mysqldb.Open(dsn, config...)
	}
	return openPostgres(dsn, config...)
}

// isSQLite reports whether db is an SQLite file (NewSQLite) rather than a
// PostgreSQL schema (New).
func (db *DB) isSQLite() bool { return strings.HasPrefix(db.DSN, "file:") }

// Time returns t as the run's store compares times: as it is on
// PostgreSQL, as text in sqlitedb.TimeLayout on SQLite.
func (db *DB) Time(t time.Time) any {
	if db.isSQLite() {
		return t.UTC().Format(sqlitedb.TimeLayout)
	}
	if db.isMySQL() {
		return t.UTC()
	}
	return t
}

// NullTime is Time for a time that may be absent: nil stays NULL.
func (db *DB) NullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return db.Time(*t)
}

// Now returns the time by the clock the queue keeps on db: the server's
// on PostgreSQL, the process's on SQLite, which runs in the process. Tests
// that move or check a job's times by hand reckon from it, as the queue
// does.
func (db *DB) Now(t testing.TB) time.Time {
	t.Helper()
	if db.isSQLite() {
		return time.Now()
	}
	var now time.Time
	q := "SELECT now()"
	if db.isMySQL() {
		q = "SELECT UTC_TIMESTAMP(6)"
	}
	if err := db.SQL.QueryRow(q).Scan(&now); err != nil {
		t.Fatalf("pgtest: the server's time: %v", err)
	}
	return now
}
