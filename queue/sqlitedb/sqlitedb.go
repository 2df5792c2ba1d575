// Package sqlitedb opens an SQLite database for the queue: a file in WAL
// mode (readers never wait for the writer), with a busy timeout (a writer
// waits for another process's write instead of failing), transactions that
// take the write lock when they begin, and foreign keys on.
//
// It is pure Go: modernc.org/sqlite (SQLite compiled to Go) under the
// gorm dialector github.com/libtnb/sqlite. No cgo and no C compiler, so
// CGO_ENABLED=0 builds work, cross-compiling needs no C toolchain, and a
// first build does not compile SQLite's C source. Importing the dialector
// turns on, for the whole process, modernc.org/sqlite's strict pragmas (a
// misspelt _pragma fails the connection), open-file-description locks on
// Linux and fdatasync: each can be turned off by calling its switch in
// modernc.org/sqlite with false before the first database opens.
//
// The pool Open returns keeps up to MaxIdleConns connections open between
// uses, enough for a runner with the default workers whose handlers each
// use one: an SQLite connection is a file handle and a page cache, cheap
// to keep and costly to reopen (the schema is read again). Connections
// idle for ConnMaxIdleTime are closed, so a burst's connections do not
// stay forever. Writers still take turns, one at a time, as SQLite allows;
// the busy timeout makes the others wait.
//
//	db, err := sqlitedb.Open("jobs.db")
//	client, err := queue.NewClient(db, reg)
package sqlitedb

import (
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/libtnb/sqlite"
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
	// The pool is opened here, on exactly DSN(path), and handed to the
	// dialector: given a DSN, the dialector would add parameters of its own
	// (times read back as time.Time) that change how the queue's TIMESTAMP
	// columns, text in TimeLayout, scan.
	sqlDB, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	sqlDB.SetMaxIdleConns(MaxIdleConns)
	sqlDB.SetConnMaxIdleTime(ConnMaxIdleTime)
	opts := append([]gorm.Option{&gorm.Config{Logger: logger.Discard}}, config...)
	db, err := gorm.Open(sqlite.New(sqlite.Config{Conn: sqlDB}), opts...)
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	return db, nil
}

// MaxIdleConns is how many connections the pool Open returns keeps open
// between uses: a runner's default 100 workers (queue.DefaultWorkers),
// each handler holding one, plus the runner's own few, with room to spare.
// Only connections opened at once are kept: a quiet process keeps few.
const MaxIdleConns = 128

// ConnMaxIdleTime is how long a connection of the pool Open returns stays
// open unused before it is closed.
const ConnMaxIdleTime = 5 * time.Minute

// TimeLayout is how the queue writes times in SQLite (UTC, fixed width, so
// that comparing the text compares the times): bind times in this layout
// when querying the queue's tables by hand.
const TimeLayout = store.SQLiteTimeLayout
