// Package sqlitedb opens an SQLite database for the queue: a file in WAL
// mode (readers never wait for the writer), with a busy timeout (a writer
// waits for another process's write instead of failing), transactions that
// take the write lock when they begin, and foreign keys on.
//
// It uses gorm's SQLite driver over modernc.org/sqlite, SQLite compiled to
// Go: no cgo, so CGO_ENABLED=0 builds work and cross-compiling needs no C
// toolchain.
//
//	db, err := sqlitedb.Open("jobs.db")
//	client, err := queue.NewClient(db, reg)
package sqlitedb

import (
	"fmt"
	"net/url"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/queue/internal/store"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// BusyTimeout is how long, in milliseconds, a connection waits for another
// process's write before it fails with SQLITE_BUSY.
const BusyTimeout = 5000

// DSN returns the modernc.org/sqlite data source name Open uses for the
// file at path.
func DSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)") // with WAL: durable across process crashes, may lose the last commits in a power cut
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating it if needed) the SQLite database at path, with a
// silent gorm logger unless config says otherwise.
func Open(path string, config ...gorm.Option) (*gorm.DB, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlitedb: need a file path, not %q: an in-memory database is private to one connection", path)
	}
	opts := append([]gorm.Option{&gorm.Config{Logger: logger.Discard}}, config...)
	db, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", DSN: DSN(path)}), opts...)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	// Connections are cheap to keep and their page caches warm: keep
	// the runner's loops and a few handlers' open between uses.
	sqlDB.SetMaxIdleConns(8)
	return db, nil
}

// TimeLayout is how the queue writes times in SQLite (UTC, fixed width, so
// that comparing the text compares the times): bind times in this layout
// when querying the queue's tables by hand.
const TimeLayout = store.SQLiteTimeLayout
