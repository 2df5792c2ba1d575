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
