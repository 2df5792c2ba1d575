package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// sqlite is the Store on SQLite. SQLite has one writer at a time, no SKIP
// LOCKED, no LISTEN/NOTIFY and no advisory locks, so:
//
//   - every write of the process waits its turn on one semaphore per
//     database file (write), rather than in SQLite's busy handler, which
//     sleeps; other processes on the file meet it in the busy handler;
//   - a claim is one UPDATE … RETURNING, atomic under the write lock;
//   - runners in the process are woken directly (hub), and runners in other
//     processes find jobs when they poll;
//   - transactions begin with a write, so they hold the write lock from
//     their first statement, which serialises dependency release and
//     schedule ticks as PostgreSQL's row and advisory locks do.
//
// Times are stored as text in one fixed-width UTC layout (timeLayout), so
// that SQLite compares them as it compares strings.
type sqlite struct {
	gdb    *gorm.DB
	db     *sql.DB
	shared *fileState

	stmtsMu sync.Mutex
	stmts   map[string]*sql.Stmt // see prepared
}

// fileState is what the stores on one database file in this process share.
type fileState struct {
	write chan struct{} // a semaphore of one: the process's turn to write
	hub   hub
	// wrote is set by each write in the process's turn, and cleared by the
	// checkpoint that follows it: an idle queue is not checkpointed.
	wrote atomic.Bool
}

var (
	filesMu sync.Mutex
	files   = map[string]*fileState{}
)

// minBusyTimeout is the least busy timeout the store accepts: with none,
// a write that meets another process's fails at once.
const minBusyTimeout = time.Second

func openSQLite(gdb *gorm.DB, db *sql.DB) (*sqlite, error) {
	var seq int
	var name, file string
	if err := db.QueryRow("PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		return nil, err
	}
	if file == "" {
		// Every connection of the pool would have a database of its own.
		return nil, fmt.Errorf("%w: an in-memory SQLite database is private to one connection; use a file", ErrUnsupported)
	}
	var busy int64
	if err := db.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil {
		return nil, err
	}
	if time.Duration(busy)*time.Millisecond < minBusyTimeout {
		return nil, fmt.Errorf("%w: the SQLite connection's busy timeout is %d ms; open it with sqlitedb.Open, "+
			"or give the DSN _pragma=busy_timeout(5000)", ErrUnsupported, busy)
	}
	// WAL lets readers read while one writes; the setting stays with the file.
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return nil, err
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("%w: SQLite refused WAL mode (journal mode %q)", ErrUnsupported, mode)
	}
	filesMu.Lock()
	defer filesMu.Unlock()
	fs := files[file]
	if fs == nil {
		fs = &fileState{write: make(chan struct{}, 1)}
		files[file] = fs
	}
	return &sqlite{gdb: gdb, db: db, shared: fs}, nil
}

func (*sqlite) Dialect() string { return "sqlite" }

// Checkpointer is a store whose write-ahead log a runner moves into the
// database in the background: SQLite's.
type Checkpointer interface {
	// Checkpoint copies the log's committed pages into the database as
	// far as no reader still needs them, without waiting for any
	// connection (a passive checkpoint).
	Checkpoint(ctx context.Context) error
}

// Checkpoint is Checkpointer's. SQLite checkpoints on its own in the
// commit that takes the log past 1,000 pages, and that commit waits for
// the copy and its syncs: on an idle queue, one pickup in a hundred or
// so, a millisecond or two each. A checkpoint a runner makes every so
// often, on a connection of the pool, keeps the log short enough that
// commits seldom do; the next writer then starts the log afresh.
// Nothing written in the process's turn since the last checkpoint, it
// does nothing: the writes of a caller's transaction, and of other
// processes, are left to the next one, or to their own runners.
func (s *sqlite) Checkpoint(ctx context.Context) error {
	if !s.shared.wrote.Swap(false) {
		return nil
	}
	err := s.gdb.WithContext(ctx).Exec("PRAGMA wal_checkpoint(PASSIVE)").Error
	if err != nil {
		s.shared.wrote.Store(true)
	}
	return err
}

// lock waits for the process's turn to write, or for ctx to end.
func (s *sqlite) lock(ctx context.Context) error {
	select {
	case s.shared.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *sqlite) unlock() { <-s.shared.write }

// writing runs fn in the process's turn to write.
func (s *sqlite) writing(ctx context.Context, fn func() error) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.shared.wrote.Store(true)
	return fn()
}

// statement runs fn, one statement, on db: in a caller's transaction as it
// is, otherwise in the process's turn to write, as a statement of its own.
// One statement needs no BEGIN and COMMIT, nor a savepoint, around it.
func (s *sqlite) statement(ctx context.Context, db *gorm.DB, fn func(db *gorm.DB) error) error {
	db = db.WithContext(ctx)
	if inTx(db) {
		return fn(db)
	}
	return s.writing(ctx, func() error { return fn(db) })
}

// Tx takes the process's turn to write for the transaction, unless db is a
// caller's transaction, which holds SQLite's write lock already once it has
// written, and may hold it longer than a turn should last.
//
// What the transaction tells the runners of this process (see afterCommit)
// is told once it commits. In a caller's transaction, whose commit the
// store does not see, it is not told: the runners find it by reading the
// database (a cancelled job at their next lease renewal).
func (s *sqlite) Tx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	if inTx(db) {
		return db.WithContext(ctx).Transaction(fn)
	}
	var after afterCommit
	ctx = context.WithValue(ctx, afterCommitKey{}, &after)
	err := s.writing(ctx, func() error { return db.WithContext(ctx).Transaction(fn) })
	if err == nil {
		for _, id := range after.cancelled {
			s.shared.hub.publish(CancelChannel, strconv.FormatInt(id, 10))
		}
	}
	return err
}

// afterCommit is what a transaction of the store's own (see sqlite.Tx)
// tells the runners once it commits: a runner told before, of a
// transaction that then rolled back, would act on what never happened.
type afterCommit struct {
	cancelled []int64 // running jobs it cancelled
	due       []due   // jobs it made due (MariaDB; SQLite tells them at once)
}

type afterCommitKey struct{}

// afterCommitOf returns the afterCommit of tx, a transaction of the
// store's own, or nil for a caller's transaction.
func afterCommitOf(tx *gorm.DB) *afterCommit {
	after, _ := tx.Statement.Context.Value(afterCommitKey{}).(*afterCommit)
	return after
}

// SQLiteTimeLayout is how the store writes times in SQLite: UTC, fixed
// width, so that text order is time order; the driver reads it back as a
// time.
const SQLiteTimeLayout = "2006-01-02 15:04:05.000000000+00:00"

const timeLayout = SQLiteTimeLayout

func sqliteTime(t time.Time) any { return t.UTC().Format(timeLayout) }

// now is the store's clock: SQLite runs in the process, so the process's
// clock is the database's.
func now() time.Time { return time.Now().UTC() }

// sqlTime scans a time that the driver hands over as a time (a column
// declared TIMESTAMP) or as text (an expression over one).
type sqlTime struct {
	t     time.Time
	valid bool
}

func (st *sqlTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*st = sqlTime{}
		return nil
	case time.Time:
		*st = sqlTime{t: v, valid: true}
		return nil
	case []byte:
		src = string(v)
	}
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("cannot scan %T into a time", src)
	}
	// The first layout reads timeLayout too; the second, times SQLite's
	// CURRENT_TIMESTAMP wrote (and MariaDB's, in JSON); the third,
	// PostgreSQL's in JSON.
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			*st = sqlTime{t: t, valid: true}
			return nil
		}
	}
	return fmt.Errorf("cannot read %q as a time", s)
}

func (st sqlTime) ptr() *time.Time {
	if !st.valid {
		return nil
	}
	return &st.t
}

// jsonIDs writes ids as a JSON array, for json_each.
func jsonIDs(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// inList is a condition that col is one of a JSON array's values, bound
// to param.
func inList(col, param string) string {
	return col + " IN (SELECT value FROM json_each(" + param + "))"
}

func (s *sqlite) Transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ce interface{ Code() int }
	if errors.As(err, &ce) {
		switch ce.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED: another writer held the lock too long
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF)
}

func sqliteUndefined(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "no such table: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name, true
	}
	if strings.Contains(msg, "no such column") || strings.Contains(msg, "has no column named") {
		return "", true
	}
	return "", false
}

// hub wakes the runners of one database file in this process: SQLite has
// no notifications, so the store hands its own to the listeners directly.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch chan notice
}

type notice struct{ channel, payload string }

// publish hands a notification to every listener without waiting: a
// listener that has fallen behind misses it, and finds the jobs when it
// polls.
func (h *hub) publish(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		select {
		case sub.ch <- notice{channel, payload}:
		default:
		}
	}
}

func (h *hub) subscribe() *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*subscriber]struct{}{}
	}
	sub := &subscriber{ch: make(chan notice, 1024)}
	h.subs[sub] = struct{}{}
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// Listen delivers the process's own notifications. Another process's jobs
// and cancellations are found by polling and lease renewal.
func (s *sqlite) Listen(ctx context.Context, ready func(), each func(channel, payload string)) error {
	return s.shared.hub.listen(ctx, ready, each)
}

// listen is Listen on h.
func (h *hub) listen(ctx context.Context, ready func(), each func(channel, payload string)) error {
	sub := h.subscribe()
	defer h.unsubscribe(sub)
	ready()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case n := <-sub.ch:
			each(n.channel, n.payload)
		}
	}
}

// due is a job that may have become claimable: notify tells the runners of
// the queues that got jobs due now, as PostgreSQL's notifyDue does.
type due struct {
	queue    string
	priority int
	runAt    time.Time
	rescues  int
}

func (s *sqlite) notify(jobs []due) { notifyHub(&s.shared.hub, jobs) }

// notifyHub tells h's runners of the queues that got jobs due now.
func notifyHub(h *hub, jobs []due) {
	if len(jobs) == 0 {
		return
	}
	t := now()
	top := map[string]int{}
	suspects := map[string]bool{}
	for _, j := range jobs {
		if j.runAt.After(t) {
			continue
		}
		if j.rescues > 0 {
			suspects[j.queue] = true
		} else {
			top[j.queue] = max(top[j.queue], j.priority)
		}
	}
	for q, p := range top {
		h.publish(JobsChannel, q+":"+strconv.Itoa(p))
	}
	for q := range suspects {
		h.publish(JobsChannel, q+":s")
	}
}
