package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// mysql is the Store on MariaDB (10.11; MySQL 8 lacks the RETURNING the
// inserts use). It is reached through gorm's dialector name and
// database/sql alone, so that this package does not import the driver:
// programs on PostgreSQL or SQLite do not link it. MariaDB has SKIP
// LOCKED but no UPDATE ... RETURNING, no LISTEN/NOTIFY and no partial
// indexes, so:
//
//   - a claim is a transaction: SELECT ... FOR UPDATE SKIP LOCKED, then an
//     UPDATE of the IDs it locked, then a read of their rows; the other
//     guarded writes lock their rows the same way before they change them,
//     to know which they changed;
//   - runners in the process are woken directly (hub), once the
//     transaction that made the jobs due commits; runners in other
//     processes find jobs when they poll, as on SQLite;
//   - times are DATETIME(6) in UTC, set by the server's clock
//     (UTC_TIMESTAMP(6)), so that processes on several machines agree; the
//     connection must bind and read times in UTC (loc=UTC, parseTime=true);
//   - transactions run at READ COMMITTED: REPEATABLE READ's gap locks would
//     make concurrent claims and inserts wait for each other;
//   - DDL commits as it runs, so a migration is not atomic: Migrate holds a
//     named lock (GET_LOCK) so that processes migrate one at a time, and
//     records each version once its statements have run.
type mysql struct {
	gdb *gorm.DB
	db  *sql.DB
	hub *hub
	// noInfile is set once the server refused a local file: Copy inserts.
	noInfile atomic.Bool
	// loads counts Copy's calls that LOAD DATA stored, which tests read.
	loads atomic.Int64
	// txOpts are the options of the store's transactions: none if the
	// connection's sessions are at READ COMMITTED already (mysqldb's DSN
	// sets it), which saves each a statement.
	txOpts *sql.TxOptions
	// multi is set if the connection takes several statements in one call,
	// their arguments interpolated on the client (mysqldb's DSN allows
	// both): see batch.
	multi bool
}

var (
	mysqlHubsMu sync.Mutex
	mysqlHubs   = map[string]*hub{}
)

// mysqlNow is the server's time now, in UTC.
const mysqlNow = "UTC_TIMESTAMP(6)"

func openMySQL(gdb *gorm.DB, db *sql.DB) (*mysql, error) {
	// Times go in and out as UTC: the columns are DATETIME, which keeps no
	// zone, and the store writes the server's UTC clock into them.
	probe := time.Date(2000, 1, 2, 3, 4, 5, 6000, time.UTC)
	var bound string
	var nowVal any
	if err := db.QueryRow("SELECT CAST(CAST(? AS DATETIME(6)) AS CHAR), "+mysqlNow, probe).Scan(&bound, &nowVal); err != nil {
		return nil, err
	}
	if bound != "2000-01-02 03:04:05.000006" {
		return nil, fmt.Errorf("%w: the MySQL connection binds times in another zone than UTC (%q); open it with mysqldb.Open, "+
			"or give the DSN loc=UTC", ErrUnsupported, bound)
	}
	if _, ok := nowVal.(time.Time); !ok {
		return nil, fmt.Errorf("%w: the MySQL connection reads times as %T; open it with mysqldb.Open, or give the DSN parseTime=true",
			ErrUnsupported, nowVal)
	}
	var where sql.NullString
	var isolation string
	if err := db.QueryRow("SELECT CONCAT(@@hostname, ':', @@port, '/', DATABASE()), @@tx_isolation").Scan(&where, &isolation); err != nil {
		return nil, err
	}
	if !where.Valid {
		return nil, fmt.Errorf("%w: the MySQL connection has no database selected; name one in the DSN", ErrUnsupported)
	}
	mysqlHubsMu.Lock()
	defer mysqlHubsMu.Unlock()
	h := mysqlHubs[where.String]
	if h == nil {
		h = &hub{}
		mysqlHubs[where.String] = h
	}
	s := &mysql{gdb: gdb, db: db, hub: h, txOpts: readCommitted}
	if isolation == "READ-COMMITTED" {
		s.txOpts = nil
	}
	var one int
	s.multi = db.QueryRow("SELECT ?; SELECT 2", 1).Scan(&one) == nil && one == 1
	return s, nil
}

func (*mysql) Dialect() string { return "mysql" }

// readCommitted is the isolation of the store's transactions.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Tx runs fn in a transaction at READ COMMITTED, or in a savepoint of a
// caller's. What the transaction tells the runners of this process (due
// jobs, cancelled ones) is told once it commits: told before, a runner
// would look for rows it cannot see yet. In a caller's transaction, whose
// commit the store does not see, due jobs are told at once (a runner that
// looks too early finds them at its next poll) and cancellations are found
// at the runners' next lease renewal.
func (s *mysql) Tx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	if inTx(db) {
		return db.WithContext(ctx).Transaction(fn)
	}
	var after afterCommit
	ctx = context.WithValue(ctx, afterCommitKey{}, &after)
	err := db.WithContext(ctx).Transaction(fn, readCommitted)
	if err == nil {
		for _, id := range after.cancelled {
			s.hub.publish(CancelChannel, strconv.FormatInt(id, 10))
		}
		notifyHub(s.hub, after.due)
	}
	return err
}

// tell wakes the runners of jobs that tx made due: at its commit if it is
// the store's own transaction, at once otherwise.
func (s *mysql) tell(tx *gorm.DB, jobs []due) {
	if after := afterCommitOf(tx); after != nil {
		after.due = append(after.due, jobs...)
		return
	}
	notifyHub(s.hub, jobs)
}

// sqlTx runs fn in a transaction of database/sql at READ COMMITTED.
func (s *mysql) sqlTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, s.txOpts)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// mysqlTime binds a time: the driver writes it in UTC (loc=UTC). A time
// outside the years 1 to 9999 (DATETIME's, less the year 0 the driver
// refuses) is bound as the nearest end, which
// every stored time compares with as with the time itself.
func mysqlTime(t time.Time) any {
	t = t.UTC()
	if t.Before(firstDatetime) {
		return firstDatetime
	}
	if t.After(lastDatetime) {
		return lastDatetime
	}
	return t
}

var (
	firstDatetime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	lastDatetime  = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// ints writes ids as a list for IN (...): numbers, not parameters, so a
// list of any length is one statement with no placeholder limit. An empty
// list matches nothing.
func ints(ids []int64) string {
	if len(ids) == 0 {
		return "NULL"
	}
	b := make([]byte, 0, len(ids)*8)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// placeholders returns n placeholders for IN (...), and args of l.
func placeholders(l []string) (string, []any) {
	if len(l) == 0 {
		return "NULL", nil
	}
	args := make([]any, len(l))
	for i, v := range l {
		args[i] = v
	}
	return strings.Repeat("?, ", len(l)-1) + "?", args
}

// mysqlKey is Key in SQL.
const mysqlKey = "(id * 1048576 + claims % 1048576)"

// mysqlErr matches the number of a MariaDB error in its text ("Error 1213
// (40001): Deadlock found ..."): the driver's type is not imported here.
var mysqlErr = regexp.MustCompile(`^Error (\d+)`)

func mysqlCode(err error) int {
	for ; err != nil; err = errors.Unwrap(err) {
		if m := mysqlErr.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// Transient: deadlocks (1213) and lock wait timeouts (1205) roll a
// statement or a transaction back, and succeed when tried again; so do
// lost connections.
func (s *mysql) Transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	switch mysqlCode(err) {
	case 1205, 1213:
		return true
	case 0:
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
			errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF) ||
			strings.Contains(err.Error(), "invalid connection")
	}
	return false
}

// mysqlUndefined reads "Table 'db.sheaf_jobs' doesn't exist" (1146) and
// "Unknown column ..." (1054).
func mysqlUndefined(err error) (string, bool) {
	switch mysqlCode(err) {
	case 1146:
		msg := err.Error()
		if i := strings.Index(msg, "Table '"); i >= 0 {
			name, _, _ := strings.Cut(msg[i+len("Table '"):], "'")
			return name, true
		}
		return "", true
	case 1054:
		return "", true
	}
	return "", false
}

// isDuplicate reports whether err is a duplicate key (1062).
func isDuplicate(err error) bool { return mysqlCode(err) == 1062 }

// Listen delivers the process's own notifications. Another process's jobs
// and cancellations are found by polling and lease renewal.
func (s *mysql) Listen(ctx context.Context, ready func(), each func(channel, payload string)) error {
	return s.hub.listen(ctx, ready, each)
}

// lockName names key's row in sheaf_leader, within its 64 characters.
func lockName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "lock:" + hex.EncodeToString(sum[:24])
}

// LockGroup locks a row of sheaf_leader named for key until tx ends, as
// PostgreSQL's transaction-level advisory lock does: an upsert locks the
// row it inserts or finds. The row's lease is long expired, so no runner
// mistakes it for the leadership, which is a row of its own name.
func (s *mysql) LockGroup(tx *gorm.DB, key string) error {
	return tx.Exec("INSERT INTO sheaf_leader (name, holder, expires_at) VALUES (?, '', '2000-01-01') ON DUPLICATE KEY UPDATE name = name",
		lockName(key)).Error
}

// mysqlStmt is a statement of a batch: its SQL and arguments, and, if it
// returns rows (a SELECT), read, which reads them and leaves them open.
type mysqlStmt struct {
	query string
	args  []any
	read  func(*sql.Rows) error
}

// batch runs stmts in tx, in their order: in one round trip if the
// connection takes several statements in a call (s.multi), else one by
// one. Either way a statement that fails ends the batch with its error.
func (s *mysql) batch(ctx context.Context, tx *sql.Tx, stmts ...mysqlStmt) error {
	if !s.multi || len(stmts) == 1 {
		for _, st := range stmts {
			if st.read == nil {
				if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
					return err
				}
				continue
			}
			rows, err := tx.QueryContext(ctx, st.query, st.args...)
			if err != nil {
				return err
			}
			err = st.read(rows)
			if err = errors.Join(err, rows.Close()); err != nil {
				return err
			}
		}
		return nil
	}
	queries, args := make([]string, len(stmts)), []any(nil)
	for i, st := range stmts {
		queries[i], args = st.query, append(args, st.args...)
	}
	rows, err := tx.QueryContext(ctx, strings.Join(queries, ";\n"), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	// The driver passes over the results of statements that return no
	// rows: the first result is the first SELECT's.
	first := true
	for _, st := range stmts {
		if st.read == nil {
			continue
		}
		if !first && !rows.NextResultSet() {
			if err := rows.Err(); err != nil {
				return err
			}
			return errors.New("store: a batch of statements returned fewer results than it has SELECTs")
		}
		first = false
		if err := st.read(rows); err != nil {
			return err
		}
	}
	for rows.NextResultSet() { // to the error of a statement after the last SELECT, if one failed
	}
	return rows.Err()
}
