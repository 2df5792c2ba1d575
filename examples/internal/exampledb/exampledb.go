// Package exampledb opens the database an example program works in: an
// SQLite file in a new temporary folder when no PostgreSQL URL is given, or
// a fresh schema of its own on the PostgreSQL server the URL names.
package exampledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// DB is an open example database.
type DB struct {
	*gorm.DB
	// Where says where the data is, for the program's output: the SQLite
	// file's name, or the schema.
	Where string
	dir   string
	sql   *sql.DB
}

// Open opens the example's database on a pool of conns connections. With
// no dsn it creates an SQLite file in a new temporary folder, which Close
// removes, and says so on standard output (its first line); with a
// postgres:// URL it drops and recreates the schema name and works in it.
func Open(ctx context.Context, name, dsn string, conns int) (*DB, error) {
	d := &DB{}
	var err error
	if dsn == "" {
		if d.dir, err = os.MkdirTemp("", name+"-db-"); err != nil {
			return nil, err
		}
		path := filepath.Join(d.dir, "sheaf.db")
		fmt.Printf("sheaf: no -dsn or DATABASE_URL given; using an SQLite database at %s (pass -dsn postgres://… for PostgreSQL)\n", path)
		d.Where = filepath.Base(path)
		d.DB, err = sqlitedb.Open(path)
	} else {
		d.Where = "schema " + name
		d.DB, err = FreshSchema(ctx, name, dsn)
	}
	if err == nil {
		d.sql, err = d.DB.DB()
	}
	if err != nil {
		return nil, errors.Join(err, d.removeDir())
	}
	d.sql.SetMaxOpenConns(conns)
	d.sql.SetMaxIdleConns(conns)
	return d, nil
}

// Close closes the pool and removes the SQLite file's folder, if any.
func (d *DB) Close() error { return errors.Join(d.sql.Close(), d.removeDir()) }

func (d *DB) removeDir() error {
	if d.dir == "" {
		return nil
	}
	return os.RemoveAll(d.dir)
}

// FreshSchema drops and recreates schema on the PostgreSQL server that dsn,
// a postgres:// URL, names, and returns a gorm handle whose connections
// work in it (pgx sends the URL's search_path parameter to the server as a
// setting of every connection it opens).
func FreshSchema(ctx context.Context, schema, dsn string) (*gorm.DB, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("the DSN must be a postgres:// URL (or none, for SQLite)")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := gorm.Open(postgres.Open(u.String()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u.Redacted(), err)
	}
	for _, stmt := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema} {
		if err := db.WithContext(ctx).Exec(stmt).Error; err != nil {
			if sqlDB, dbErr := db.DB(); dbErr == nil {
				_ = sqlDB.Close()
			}
			return nil, fmt.Errorf("recreate schema %s: %w", schema, err)
		}
	}
	return db, nil
}

// NoLeftovers points TMPDIR, where Open makes its folders, at a folder of
// the test's own, and fails the test if anything is left in it when the
// test ends: an example must remove what it made.
func NoLeftovers(t testing.TB) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Cleanup(func() {
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Error(err)
		}
		for _, e := range left {
			t.Errorf("left behind in the temporary folder: %s", e.Name())
		}
	})
}
