package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Store is a database the queue keeps its jobs in: every statement the
// client and the runner run. Open returns the one for a gorm handle's
// database. A Store is safe for concurrent use.
//
// Methods that take a tx run inside a transaction that Tx began (or a
// caller's, for the client's Tx); the others run on their own.
type Store interface {
	// Dialect names the database: "postgres", "sqlite" or "mysql".
	Dialect() string

	// Migrate brings the schema up to SchemaVersion and returns the
	// version it found; Migrations is the SQL it applies, in order.
	Migrate(ctx context.Context) (found int, err error)
	Migrations() []string
	// Preflight reads the schema's version and how many more client
	// connections the server accepts.
	Preflight(ctx context.Context) (version, room int, err error)

	// Tx runs fn in a write transaction on db (a savepoint if db is in a
	// transaction already).
	Tx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error

	// Insert inserts jobs in order, skipping those whose idempotency key
	// is taken, wakes the runners of the queues that got due jobs, and
	// scans the inserted rows, in ID order, into dest, a gorm model slice.
	// db may be a transaction.
	Insert(ctx context.Context, db *gorm.DB, jobs []NewJob, dest any) error
	// InsertKeyed inserts jobs as Insert does but reads no row back: it
	// returns the places in jobs, in order, of those it skipped, their
	// idempotency key taken by an existing job or an earlier one of jobs.
	// It is for callers that need to know only that the jobs are stored.
	InsertKeyed(ctx context.Context, db *gorm.DB, jobs []NewJob) (skipped []int, err error)
	// Copy inserts jobs, none with an idempotency key, the fastest way the
	// database has, and returns how many it inserted.
	Copy(ctx context.Context, jobs []NewJob) (int64, error)
	// CopyRows is Copy of n jobs that row gives, in order, one at a time:
	// PostgreSQL asks for each as it sends the ones before it, so that
	// the caller prepares the jobs while the server stores them. An error
	// of row stops the copy, nothing is stored, and CopyRows returns it as
	// it is.
	CopyRows(ctx context.Context, n int, row func(i int) (NewJob, error)) (int64, error)
	// Analyze refreshes the planner's statistics of the jobs table.
	Analyze(ctx context.Context) error

	// Jobs reads the jobs f selects on db (the store's, or a caller's
	// transaction), by ascending ID (descending if f.Newest), at most limit
	// (0: no limit), into dest, a gorm model slice.
	Jobs(ctx context.Context, db *gorm.DB, f Filter, limit int, dest any) error
	// Count counts the jobs f selects.
	Count(ctx context.Context, db *gorm.DB, f Filter) (int64, error)
	// JobIDs returns the IDs of the jobs f selects.
	JobIDs(ctx context.Context, db *gorm.DB, f Filter) ([]int64, error)
	Ready(ctx context.Context, db *gorm.DB) (n int64, oldest time.Duration, err error)
	// TypicalDuration is the median and 95th percentile run time of
	// kind's last history completed jobs that finished before before, and
	// how many there were; ok is false when there are none. A review
	// passes the first start of the kind's jobs it reviews, which leaves
	// them all out: each finished after it started.
	TypicalDuration(ctx context.Context, db *gorm.DB, kind string, before time.Time, history int) (b Baseline, ok bool, err error)
	// Activity reads the buckets of width bucket, from start until end, in
	// which jobs of queue ("": every queue) finished COMPLETED or FAILED, in
	// order (activity.go); buckets without such jobs are left out.
	Activity(ctx context.Context, start, end time.Time, bucket time.Duration, queue string) ([]ActivityRow, error)

	// The client's management of one job, in tx, from LockStatus on.
	LockStatus(tx *gorm.DB, id int64) (status string, found bool, err error)
	Attempts(tx *gorm.DB, id int64) (attempts, max int, err error)
	// CancelJobs cancels the first limit QUEUED or PROCESSING jobs f
	// selects, by ID, tells the runners of those that were running, records
	// those attempts, and returns the IDs it cancelled, in order.
	CancelJobs(tx *gorm.DB, f Filter, limit int) ([]int64, error)
	Retry(tx *gorm.DB, id int64) error
	// RunNow makes QUEUED job id due now if it is due later, keeping its
	// attempts, and tells the runners.
	RunNow(tx *gorm.DB, id int64) error
	RetryFailed(tx *gorm.DB, f Filter, maxTotal int) (int64, error)

	// Schedules, in tx.
	LockSchedule(tx *gorm.DB, name string) (last time.Time, found bool, err error)
	AddSchedule(tx *gorm.DB, name string, last time.Time) error
	SetLastTick(tx *gorm.DB, name string, at time.Time) error

	// Completion in a transaction: CompleteTx, of a parent in some rule
	// or of a job whose handler completes it in its own transaction
	// (Job.CompleteTx); then, to release dependants, for each rule
	// LockGroup and PeriodParents, then InsertChild.
	CompleteTx(tx *gorm.DB, id int64, claims int) (period, runID sql.NullString, completed bool, err error)
	// StateIn is State as tx sees it. After a CompleteTx that changed
	// nothing, it tells a tx that had completed the job already from one
	// on another database.
	StateIn(tx *gorm.DB, id int64) (status string, claims int, err error)
	LockGroup(tx *gorm.DB, key string) error
	PeriodParents(tx *gorm.DB, period string, kinds []string) ([]Parent, error)
	InsertChild(tx *gorm.DB, j NewJob, parents []int64) (Child, error)

	// Hold returns a connection for one of a runner's loops; with
	// asyncCommit, its commits need not wait for the disk.
	Hold(asyncCommit bool) Conn
	StartSuspect(ctx context.Context, id int64, claims int) (attempts int, started time.Time, err error)
	Requeue(ctx context.Context, ids, keys []int64, counted []bool) ([]int64, error)
	Rescue(ctx context.Context, runner string) ([]Rescued, error)
	SetProgress(ctx context.Context, id int64, claims int, processed, total int64) (bool, error)
	SetChunkProgress(ctx context.Context, id int64, claims int, processed, total int64, times string) (bool, error)
	SetOutput(ctx context.Context, id int64, claims int, output string) (bool, error)
	State(ctx context.Context, id int64) (status string, claims int, err error)
	// Listen calls ready once it listens, then each for every notification
	// (channel JobsChannel, CancelChannel or QueuesChannel) until ctx ends or it fails.
	Listen(ctx context.Context, ready func(), each func(channel, payload string)) error

	// Queues, runners, attempt history and the audit log (queues.go).
	// Those that take a db run on it: the store's, or a caller's
	// transaction.
	//
	// SetPaused pauses or resumes a queue and tells the runners: at the
	// commit of db's transaction on PostgreSQL; on SQLite, at once outside
	// a caller's transaction and at their next read of the paused queues
	// (every poll) inside one.
	SetPaused(ctx context.Context, db *gorm.DB, name string, paused bool) error
	Paused(ctx context.Context, db *gorm.DB) ([]PausedQueue, error)
	// QueueCounts counts the jobs by queue and status, with how long each
	// queue's longest-waiting due job has waited: the QUEUED and
	// PROCESSING jobs only, if active (see CountByQueue).
	QueueCounts(ctx context.Context, db *gorm.DB, active bool) ([]QueueCount, error)
	// History reads job id's recorded attempts (those that did not
	// complete), oldest first.
	History(ctx context.Context, db *gorm.DB, id int64) ([]Attempt, error)
	Runners(ctx context.Context, within time.Duration) ([]RunnerRow, error)
	Version(ctx context.Context) (int, error)
	RecordAudit(ctx context.Context, db *gorm.DB, e AuditEntry) (int64, error)
	AuditLog(ctx context.Context, db *gorm.DB, before int64, limit int) ([]AuditEntry, error)

	// Lead makes holder the leader of the maintenance for ttl from the
	// database's now, if no runner leads, the leader's lease has expired,
	// or holder leads already (a renewal), and says whether holder leads
	// (leader.go). Resign gives holder's leadership up; Leader returns
	// the runner that leads, "" if none does.
	Lead(ctx context.Context, holder string, ttl time.Duration) (LeadResult, error)
	Resign(ctx context.Context, holder string) error
	Leader(ctx context.Context) (string, error)

	// Transient reports whether a statement that failed with err may
	// succeed if tried again.
	Transient(err error) bool

	Keeper // pruning and day roll-ups (prune.go)
	Hourly // hour roll-ups (hours.go)

	// Limits across every runner (limits.go). SetLimit writes a limit,
	// unless one an operator set stands against a declared one (ChangedBy
	// ""), and says whether it wrote; RemoveLimit deletes one or returns
	// ErrNoLimit; Limits reads them all with their use.
	SetLimit(ctx context.Context, db *gorm.DB, l Limit) (bool, error)
	RemoveLimit(ctx context.Context, db *gorm.DB, scope, target string) error
	Limits(ctx context.Context, db *gorm.DB) ([]LimitUse, error)
}

// Conn is a connection one of a runner's loops keeps for itself. It is
// dropped after an error and taken again on the next statement; one
// goroutine uses it at a time.
type Conn interface {
	Claim(ctx context.Context, c Claim) ([]Claimed, error)
	ClaimSuspect(ctx context.Context, queues []string, lease time.Duration, runner string, closedKinds []string) ([]Claimed, error)
	// ClaimSuspectLimited is ClaimSuspect within the limits in force,
	// for c's Lease, Runner and ClosedKinds (limits.go).
	ClaimSuspectLimited(ctx context.Context, queues []string, c Claim) ([]Claimed, error)
	Complete(ctx context.Context, ids, keys []int64) ([]int64, error)
	CompleteLanded(ctx context.Context, ids, keys []int64) ([]int64, error)
	Fail(ctx context.Context, f Failures) ([]int64, error)
	FailLanded(ctx context.Context, f Failures) ([]int64, error)
	Renew(ctx context.Context, lease time.Duration, ids, keys []int64, runner string) (renewed, orphans []int64, err error)
	PutBack(ctx context.Context, keys []int64, runner string) ([]JobRef, error)
	// Holds returns, in one statement, the names of the paused queues and
	// the limits in force, for a runner to know which of its claims a
	// limit may touch.
	Holds(ctx context.Context) (paused []string, limits []Limit, err error)
	SeeRunner(ctx context.Context, r RunnerRow, starting bool) error
	ForgetRunner(ctx context.Context, id string) error
	DropOn(err error)
	Close()
}

// Open returns the store of db's database, PostgreSQL, SQLite or MariaDB
// (gorm's dialector "mysql").
func Open(db *gorm.DB) (Store, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	switch name := db.Dialector.Name(); name {
	case "postgres":
		return &postgres{gdb: db, db: sqlDB}, nil
	case "sqlite":
		return openSQLite(db, sqlDB)
	case "mysql":
		return openMySQL(db, sqlDB)
	default:
		return nil, fmt.Errorf("%w: the queue runs on PostgreSQL, SQLite or MariaDB, not %q", ErrUnsupported, name)
	}
}

// ErrUnsupported is returned for a database the queue cannot use, and for
// what a database cannot do.
var ErrUnsupported = errors.New("unsupported")

// Filter selects jobs. Zero fields select everything.
type Filter struct {
	IDs                         []int64
	Kinds, Statuses             []string
	Queue, CorrelationID        string
	RunID, Period               string
	IdempotencyKeys             []string
	CreatedFrom                 time.Time // inclusive
	CreatedAfter, CreatedBefore time.Time // exclusive
	AfterID, BeforeID           int64     // exclusive
	// Search is text that last_error or the payload's JSON text holds,
	// in any case.
	Search string
	// Newest orders the jobs by descending ID.
	Newest bool
	// Unstarted selects the jobs that have never started an attempt.
	Unstarted bool
	// Retried selects the jobs that have started at least one attempt.
	Retried bool
	// RunAtLeast selects the COMPLETED jobs of its kinds whose run time
	// (completed_at - started_at) is at least their kind's duration
	// there: the review's slow jobs, found by the database.
	RunAtLeast map[string]time.Duration
	// Childless is the prefix of a one-to-one rule's child keys: it
	// selects the jobs no job has the key of their child (the prefix and
	// their ID), the parents whose child was not released.
	Childless string
}

// apply adds f's conditions to q; at converts a time for the database.
func (f Filter) apply(q *gorm.DB, at func(time.Time) any) *gorm.DB {
	if f.IDs != nil {
		q = q.Where("id IN ?", f.IDs)
	}
	if len(f.Kinds) > 0 {
		q = q.Where("kind IN ?", f.Kinds)
	}
	if len(f.Statuses) > 0 {
		q = q.Where("status IN ?", f.Statuses)
		if !slices.ContainsFunc(f.Statuses, func(s string) bool { return s != "FAILED" && s != "CANCELLED" }) {
			// The predicate of the index of failed and cancelled jobs, in
			// its words: SQLite uses a partial index only for a query
			// that repeats it, and cannot see that bound statuses imply it.
			q = q.Where(failedIndexPredicate)
		}
	}
	if f.IdempotencyKeys != nil {
		q = q.Where("idempotency_key IN ?", f.IdempotencyKeys)
	}
	for _, c := range []struct {
		col, val string
	}{{"queue", f.Queue}, {"correlation_id", f.CorrelationID}, {"run_id", f.RunID}, {"period", f.Period}} {
		if c.val != "" {
			q = q.Where(c.col+" = ?", c.val)
		}
	}
	for _, c := range []struct {
		cond string
		t    time.Time
	}{{"created_at >= ?", f.CreatedFrom}, {"created_at > ?", f.CreatedAfter}, {"created_at < ?", f.CreatedBefore}} {
		if !c.t.IsZero() {
			q = q.Where(c.cond, at(c.t))
		}
	}
	if f.AfterID > 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	if f.BeforeID > 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	if f.Unstarted {
		q = q.Where("attempts = 0")
	}
	if f.Retried {
		q = q.Where("attempts > 0")
	}
	if len(f.RunAtLeast) > 0 {
		cond, args := runAtLeast(q.Dialector.Name(), f.RunAtLeast)
		q = q.Where(cond, args...)
	}
	mysql := q.Dialector.Name() == "mysql"
	if f.Childless != "" {
		child := "CAST(? AS TEXT) || CAST(" + JobsTable + ".id AS TEXT)"
		if mysql {
			child = "CONCAT(?, " + JobsTable + ".id)"
		}
		q = q.Where("NOT EXISTS (SELECT 1 FROM "+JobsTable+" c WHERE c.idempotency_key = "+child+")", f.Childless)
	}
	if f.Search != "" {
		like, payload, escape := "ILIKE", "payload::text", `'\'`
		switch q.Dialector.Name() {
		case "sqlite":
			like, payload = "LIKE", "CAST(payload AS TEXT)" // SQLite's LIKE ignores the case of ASCII letters
		case "mysql":
			// The columns' collation ignores case; a backslash in a
			// string is an escape there, so it is written twice.
			like, payload, escape = "LIKE", "payload", `'\\'`
		}
		pattern := "%" + likeEscaper.Replace(f.Search) + "%"
		q = q.Where("(last_error "+like+" ? ESCAPE "+escape+" OR "+payload+" "+like+" ? ESCAPE "+escape+")", pattern, pattern)
	}
	return q
}

// failedIndexPredicate is the WHERE clause of index sheaf_jobs_failed.
const failedIndexPredicate = "status IN ('FAILED', 'CANCELLED')"

// likeEscaper escapes the wildcards of LIKE, and its escape character.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// order is the order of the jobs f selects.
func (f Filter) order() string {
	if f.Newest {
		return "id DESC"
	}
	return "id"
}

// inTx reports whether db is inside a transaction.
func inTx(db *gorm.DB) bool {
	_, ok := db.Statement.ConnPool.(gorm.TxCommitter)
	return ok
}

// The reads are the same on both databases but for how times are bound.

func readJobs(ctx context.Context, db *gorm.DB, f Filter, at func(time.Time) any, cols string, limit int, dest any) error {
	q := f.apply(db.WithContext(ctx).Table(JobsTable).Select(cols), at).Order(f.order())
	if limit > 0 {
		q = q.Limit(limit)
	}
	return q.Find(dest).Error
}

func countJobs(ctx context.Context, db *gorm.DB, f Filter, at func(time.Time) any) (n int64, err error) {
	err = f.apply(db.WithContext(ctx).Table(JobsTable), at).Count(&n).Error
	return n, err
}

func jobIDs(ctx context.Context, db *gorm.DB, f Filter, at func(time.Time) any) (ids []int64, err error) {
	err = f.apply(db.WithContext(ctx).Table(JobsTable), at).Pluck("id", &ids).Error
	return ids, err
}
