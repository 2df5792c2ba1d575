package pgtest

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sheaf-dev/sheaf/queue/mysqldb"
)

// DefaultMySQL is the MariaDB server of SHEAF_TEST_STORE=mysql runs when
// TEST_MYSQL_URL is not set.
const DefaultMySQL = "mysql://root@127.0.0.1:3306/test"

// MySQLBase returns TEST_MYSQL_URL, or DefaultMySQL.
func MySQLBase() string {
	if u := os.Getenv("TEST_MYSQL_URL"); u != "" {
		return u
	}
	return DefaultMySQL
}

// NewMySQL returns a fresh MariaDB database, sheaf_t_<random>, opened as
// mysqldb.Open opens it, and drops it when the test ends.
func NewMySQL(t testing.TB) *DB {
	t.Helper()
	admin, err := mysqlAdmin()
	if err != nil {
		msg := fmt.Sprintf("pgtest: %v; start MariaDB, or point TEST_MYSQL_URL at a server", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	defer admin.Close()
	name := "sheaf_t_" + randomSuffix()
	if _, err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if admin, err := mysqlAdmin(); err == nil {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
			_ = admin.Close()
		}
	})
	dsn := mysqlURL(name)
	gdb, err := mysqldb.Open(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// Tests run side by side on a server of 151 connections.
	sqlDB.SetMaxOpenConns(12)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return &DB{Schema: name, DSN: dsn, Gorm: gdb, SQL: sqlDB}
}

// mysqlURL is MySQLBase with database name.
func mysqlURL(name string) string {
	base := MySQLBase()
	i := strings.LastIndexByte(base, '/')
	return base[:i+1] + name
}

// mysqlAdmin connects to MySQLBase's database.
func mysqlAdmin() (*sql.DB, error) {
	dsn, err := mysqldb.DSN(MySQLBase())
	if err != nil {
		return nil, err
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("MariaDB at %s: %w", redact(MySQLBase()), err)
	}
	return db, nil
}

// isMySQL reports whether db is a MariaDB database (NewMySQL).
func (db *DB) isMySQL() bool { return strings.HasPrefix(db.DSN, "mysql://") }
