// Package pgtest gives tests an isolated PostgreSQL schema.
//
// The server comes from TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each call to
// [New] creates a schema of its own and a DSN whose search_path points at it,
// so tests run in parallel without seeing each other's tables, and separate
// processes given the DSN share the schema. The schema is dropped when the
// test ends.
//
// When no server answers, tests fail if the environment variable CI is set
// and are skipped with a message elsewhere.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
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
	t.Cleanup(func() {
		if err := dropSchema(base, schema); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, gdb, sqlDB, err := open(ctx, base, schema)
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

// open opens gorm on schema of the server of base, waiting as connect does
// while the server is full (gorm.Open connects once to ping).
func open(ctx context.Context, base, schema string) (dsn string, gdb *gorm.DB, sqlDB *sql.DB, err error) {
	if dsn, err = WithSearchPath(base, schema); err != nil {
		return "", nil, nil, err
	}
	for {
		gdb, err = gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err == nil || !serverFull(err) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a pause before asking again, not synchronisation
		}
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("open gorm: %w", err)
	}
	if sqlDB, err = gdb.DB(); err != nil {
		return "", nil, nil, err
	}
	// database/sql keeps two idle connections by default, so tests with many
	// concurrent workers would spend their time opening connections; the cap
	// keeps parallel tests within the server's connection limit.
	sqlDB.SetMaxOpenConns(20)
	sqlDB.SetMaxIdleConns(20)
	return dsn, gdb, sqlDB, nil
}

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
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil || !serverFull(err) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond): // a pause before asking again, not synchronisation
		}
	}
}

// serverFull reports whether err is the server refusing a connection
// because it has as many as it allows.
func serverFull(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300" // too_many_connections
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
