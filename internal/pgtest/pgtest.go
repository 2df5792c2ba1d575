// Package pgtest gives tests an isolated PostgreSQL schema.
//
// The server comes from TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each call to
// [New] creates a schema of its own and a DSN whose search_path points at it,
// so tests run in parallel without seeing each other's tables, and separate
// processes given the DSN share the schema. The schema is dropped when the
// test ends. [NewMigrated] gives a test a schema already migrated, reused
// from an earlier test of the process when that test left it as it found
// it, which spares the server most of a run's DDL.
//
// When no server answers, tests fail if the environment variable CI is set
// and are skipped with a message elsewhere.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DefaultDSN is used when TEST_DATABASE_URL is not set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseDSN returns TEST_DATABASE_URL, or DefaultDSN.
func BaseDSN() string {
	if dsn := os.Getenv("TEST_DATABASE_URL"); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// DB is a test's schema.
type DB struct {
	// Schema is the schema's name.
	Schema string
	// DSN connects to the server with search_path set to Schema.
	DSN string
	// Gorm is a gorm handle on DSN, closed when the test ends.
	Gorm *gorm.DB
	// SQL is Gorm's *sql.DB.
	SQL *sql.DB
}

// New creates a schema for t and returns a handle on it.
func New(t testing.TB) *DB {
	t.Helper()
	return newOn(t, BaseDSN())
}

// newOn creates a schema for t on the server of base.
func newOn(t testing.TB, base string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := connect(ctx, base)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			// The server answered and refused: that is not "no server".
			t.Fatalf("pgtest: connect to %s: %v", redact(base), err)
		}
		unreachable(t, base, err)
	}
	defer admin.Close(context.Background())

	schema, err := createSchema(ctx, admin, "sheaf_test_")
	if err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	if base == BaseDSN() {
		tidyAtExit()
	}
	t.Cleanup(func() {
		if err := dropSchema(base, schema); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, gdb, sqlDB, err := open(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return &DB{Schema: schema, DSN: dsn, Gorm: gdb, SQL: sqlDB}
}

// createSchema creates a schema named prefix and a random suffix.
func createSchema(ctx context.Context, admin *pgx.Conn, prefix string) (string, error) {
	schema := prefix + randomSuffix()
	_, err := admin.Exec(ctx, "CREATE SCHEMA "+schema)
	return schema, err
}

// open opens gorm on schema of the server of base.
func open(base, schema string) (dsn string, gdb *gorm.DB, sqlDB *sql.DB, err error) {
	if dsn, err = WithSearchPath(base, schema); err != nil {
		return "", nil, nil, err
	}
	if gdb, err = openPostgres(dsn, &gorm.Config{Logger: logger.Discard}); err != nil {
		return "", nil, nil, fmt.Errorf("open gorm: %w", err)
	}
	if sqlDB, err = gdb.DB(); err != nil {
		return "", nil, nil, err
	}
	sizePool(sqlDB)
	return dsn, gdb, sqlDB, nil
}

// sizePool sizes a test's pool: database/sql keeps two idle connections by
// default, so tests with many concurrent workers would spend their time
// opening connections; the cap keeps parallel tests within the server's
// connection limit, and the idle timeout has a test that waits (for a
// lease to expire, say) give its idle connections back to the server,
// which the two test processes that go test runs at once share.
func sizePool(db *sql.DB) {
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	db.SetConnMaxIdleTime(testIdleTime)
}

// testIdleTime is how long a test's pool keeps an unused connection.
const testIdleTime = 5 * time.Second

// Count returns the result of a SELECT count(*) query, failing the test on
// error. Placeholders may be gorm's ? or PostgreSQL's $1.
func (db *DB) Count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	var row *sql.Row
	if strings.Contains(query, "?") {
		row = db.Gorm.Raw(query, args...).Row()
	} else {
		row = db.SQL.QueryRow(query, args...)
	}
	if err := row.Scan(&n); err != nil {
		t.Fatalf("pgtest: %s: %v", query, err)
	}
	return n
}

// WithSearchPath returns dsn with its search_path set to schema. pgx passes
// unknown URL parameters to the server as run-time settings. Its
// connections are labelled with the schema as their application_name, so
// that a CPUMeter finds their backends.
func WithSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("TEST_DATABASE_URL must be a postgres:// URL, got %q", dsn)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// connect connects, waiting for a free connection slot while the server is
// full: parallel test packages share its connection limit.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return whileFull(ctx, func() (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) })
}

// openPostgres opens gorm on dsn, as postgres.Open does, but its pool
// waits for a free connection slot, as connect does, while the server is
// full: the test packages that go test runs at once, and their child
// processes, share the server's connection limit, and a test that meets
// it for a moment would otherwise fail on a connection it would have got
// a little later.
func openPostgres(dsn string, config ...gorm.Option) (*gorm.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open gorm: %w", err)
	}
	pool := sql.OpenDB(patient{stdlib.GetConnector(*cfg)})
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: pool}), config...)
	if err != nil {
		_ = pool.Close()
	}
	return gdb, err
}

// patient is a connector that waits, for up to fullWait, for a free
// connection slot while the server is full.
type patient struct{ driver.Connector }

// fullWait bounds patient's wait for a free connection slot.
const fullWait = 30 * time.Second

func (p patient) Connect(ctx context.Context) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, fullWait)
	defer cancel()
	return whileFull(ctx, func() (driver.Conn, error) { return p.Connector.Connect(ctx) })
}

// whileFull calls open until the server it connects to is no longer full
// (too_many_connections), or ctx ends, and returns what the last call did.
func whileFull[C any](ctx context.Context, open func() (C, error)) (C, error) {
	for {
		conn, err := open()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "53300" { // too_many_connections
			return conn, err
		}
		shed()
		select {
		case <-ctx.Done():
			return conn, err
		case <-time.After(100 * time.Millisecond): // a pause before asking again, not synchronisation
		}
	}
}

func unreachable(t testing.TB, dsn string, err error) {
	t.Helper()
	msg := fmt.Sprintf("pgtest: PostgreSQL not reachable at %s (%v); start it, or point TEST_DATABASE_URL at a server", redact(dsn), err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func dropSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	if err == nil && dsn == BaseDSN() {
		dropped.Add(1)
	}
	return err
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// redact hides a password in a DSN for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return strings.Replace(u.String(), "xxxxx", "***", 1)
}
