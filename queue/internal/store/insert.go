package store

import (
	"cmp"
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// NewJob is a validated job to insert. Payload, Backoff and Auth are JSON,
// Metadata as EncodeMetadata writes it; a nil RunAt means Delay from now,
// on the database's clock.
type NewJob struct {
	Kind, Queue        string
	Priority, Attempts int
	Payload            string
	Key, Correlation   *string
	Backoff, Auth      *string
	RunID, Period      *string
	Metadata           []byte
	RunAt              *time.Time
	Delay              time.Duration
	LimitKey           *string // the kind's partition key, for its limits (limits.go)
}

// insertSQL inserts many jobs from arrays, skips duplicates by idempotency
// key, and notifies runners of the queues that got jobs due now, all in one
// statement; insertRunSQL records the jobs' runs too (runsSeen), for jobs
// that have any.
var insertSQL, insertRunSQL = insertJobs("*", "", insertRead), insertJobs("*", ", "+runsSeen("ins"), insertRead)

// insertRead reads the inserted rows back, for Insert.
var insertRead = `SELECT ` + pgJobColumns + ` FROM ins, notified ORDER BY id`

// insertKeyedSQL and insertKeyedRunSQL are insertSQL and insertRunSQL
// that read no row back: the inserted rows return only what notifyDue and
// runsSeen need, and the statement returns one row, the notifications'
// count and the ordinals (from 1) of the jobs whose key was taken. Reading
// notified makes it run, even when nothing is skipped.
var insertKeyedSQL, insertKeyedRunSQL = insertJobs(insertKeyedCols, "", insertKeyedRead),
	insertJobs(insertKeyedCols, ", "+runsSeen("ins"), insertKeyedRead)

const (
	insertKeyedCols = "idempotency_key, queue, priority, status, run_at, rescues, run_id, period, created_at"
	insertKeyedRead = `SELECT notified, array(SELECT ord FROM input
	WHERE idempotency_key IS NOT NULL AND NOT EXISTS (SELECT FROM ins WHERE ins.idempotency_key = input.idempotency_key)
	ORDER BY ord) FROM notified`
)

// insertJobs is an insert of jobs from arrays that returns the columns
// returning of the inserted rows, with more WITH items, and then read.
func insertJobs(returning, with, read string) string {
	return `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[],
	                     $7::int[], $8::text[], $9::timestamptz[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::bytea[], $15::text[])
		WITH ORDINALITY AS t(kind, queue, priority, payload, idempotency_key, correlation_id,
		                     max_attempts, backoff, run_at, delay_us, auth, run_id, period, meta, limit_key, ord)
), ins AS (
	INSERT INTO sheaf_jobs (kind, queue, priority, payload, idempotency_key, correlation_id,
	                        max_attempts, backoff, run_at, auth, run_id, period, meta, limit_key)
	SELECT kind, queue, priority, payload::jsonb, idempotency_key, correlation_id,
	       max_attempts, backoff::jsonb, coalesce(run_at, now() + delay_us * interval '1 microsecond'), auth::jsonb,
	       run_id, period, meta, limit_key
	FROM input ORDER BY ord
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING ` + returning + `
), notified AS (` + notifyDue("ins") + `)` + with + `
` + read
}

// insertArgs returns the arrays insertJobs takes, of jobs, and whether any
// job is in a run.
func insertArgs(jobs []NewJob) (args []any, runs bool) {
	n := len(jobs)
	kinds, queues, payloads := make([]string, n), make([]string, n), make([]string, n)
	prios, attempts := make([]int32, n), make([]int32, n)
	keys, corrs, backoffs, auths := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	runIDs, periods, metas := make([]*string, n), make([]*string, n), make([][]byte, n)
	runAts, delays, limitKeys := make([]*time.Time, n), make([]int64, n), make([]*string, n)
	for i, r := range jobs {
		kinds[i], queues[i], payloads[i] = r.Kind, r.Queue, r.Payload
		prios[i], attempts[i] = int32(r.Priority), int32(r.Attempts)
		keys[i], corrs[i], backoffs[i], auths[i] = r.Key, r.Correlation, r.Backoff, r.Auth
		runIDs[i], periods[i], metas[i] = r.RunID, r.Period, r.Metadata
		runAts[i], delays[i], limitKeys[i] = r.RunAt, r.Delay.Microseconds(), r.LimitKey
		runs = runs || r.RunID != nil
	}
	return []any{kinds, queues, prios, payloads, keys, corrs,
		attempts, backoffs, runAts, delays, auths, runIDs, periods, metas, limitKeys}, runs
}

// Insert inserts jobs (in order; one with an idempotency key already taken
// is skipped), notifies runners of the queues that got jobs due now, and
// scans the inserted rows, in ID order, into dest, a gorm model slice.
// Find, not Scan: gorm's Scan writes out every statement with its
// arguments for its logger, whether it logs or not, which cost an
// Enqueue a fifth of its time.
func (*postgres) Insert(ctx context.Context, db *gorm.DB, jobs []NewJob, dest any) error {
	args, runs := insertArgs(jobs)
	query := insertSQL
	if runs {
		query = insertRunSQL
	}
	return db.WithContext(ctx).Raw(query, args...).Find(dest).Error
}

// InsertKeyed inserts jobs as Insert does, in one statement, and returns
// the places in jobs of those it skipped. The statement goes to the
// driver as it is: gorm would scan nothing here, and only spend time on
// its arrays of arguments.
func (*postgres) InsertKeyed(ctx context.Context, db *gorm.DB, jobs []NewJob) ([]int, error) {
	args, runs := insertArgs(jobs)
	query := insertKeyedSQL
	if runs {
		query = insertKeyedRunSQL
	}
	var notified int64
	var ords idList
	if err := db.Statement.ConnPool.QueryRowContext(ctx, query, args...).Scan(&notified, &ords); err != nil {
		return nil, err
	}
	// A key taken by an earlier job of jobs is taken by a row of ins, so
	// the statement does not name its later jobs.
	skipped := make([]bool, len(jobs))
	for _, o := range ords {
		skipped[o-1] = true
	}
	return skippedOf(jobs, func(i int, first bool) bool { return skipped[i] || !first }), nil
}

// insertChildSQL inserts a dependency rule's child, unless its idempotency
// key is taken (the child was released already), and notifies runners;
// insertRunChildSQL records the child's run too (runsSeen).
var insertChildSQL, insertRunChildSQL = insertChild(""), insertChild(", " + runsSeen("ins"))

// insertChild is insertChildSQL with more WITH items.
func insertChild(with string) string {
	return `
WITH ins AS (
	INSERT INTO sheaf_jobs (kind, queue, priority, payload, idempotency_key, correlation_id, max_attempts,
		backoff, run_at, auth, run_id, period, parent_ids, meta, limit_key)
	VALUES (?, ?, ?, ?::jsonb, ?, ?, ?, ?::jsonb, coalesce(?::timestamptz, now() + ? * interval '1 microsecond'),
		?::jsonb, ?, ?, ?::bigint[], ?::bytea, ?)
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING *
), notified AS (` + notifyDue("ins") + `)` + with + `
SELECT ins.id, ins.kind, ins.queue, ins.priority, ins.run_id FROM ins, notified`
}

// Child is a released child job.
type Child struct {
	JobRef
	Priority int
	RunID    *string
}

// InsertChild inserts j, a child of parents, inside tx. It returns
// sql.ErrNoRows if the child exists already.
func (*postgres) InsertChild(tx *gorm.DB, j NewJob, parents []int64) (Child, error) {
	var c Child
	query := insertChildSQL
	if j.RunID != nil {
		query = insertRunChildSQL
	}
	err := tx.Raw(query,
		j.Kind, j.Queue, j.Priority, j.Payload, j.Key, j.Correlation, j.Attempts,
		j.Backoff, j.RunAt, j.Delay.Microseconds(), j.Auth, j.RunID, j.Period, IDListValue(parents), j.Metadata, j.LimitKey).Row().Scan(
		&c.ID, &c.Kind, &c.Queue, &c.Priority, &c.RunID)
	return c, err
}

var copyColumns = []string{"kind", "queue", "priority", "payload", "correlation_id", "max_attempts", "backoff", "run_at", "auth", "run_id", "period", "meta", "limit_key"}

// Copy inserts jobs, none with an idempotency key, with one binary COPY in
// one transaction, notifies runners of the queues that got jobs due now,
// and returns how many it inserted. It needs the pgx driver.
func (s *postgres) Copy(ctx context.Context, jobs []NewJob) (int64, error) {
	return s.CopyRows(ctx, len(jobs), func(i int) (NewJob, error) { return jobs[i], nil })
}

// CopyRows is Copy of the jobs row gives, asked for by pgx's COPY as it
// fills its buffers to send.
func (s *postgres) CopyRows(ctx context.Context, count int, row func(i int) (NewJob, error)) (int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var n int64
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		err := pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
			var now time.Time // the database's clock, for RunAt-less and delayed jobs
			if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
				return err
			}
			due := map[string]int{} // queue → highest due priority
			var runs runsFound
			// The jobs of one enqueue call share their metadata: one
			// value serves them all.
			var metaOf []byte
			var meta any
			var rowErr error
			src := pgx.CopyFromSlice(count, func(i int) ([]any, error) {
				r, err := row(i)
				if err != nil {
					rowErr = err
					return nil, err
				}
				if r.Key != nil {
					rowErr = fmt.Errorf("%w: Copy takes no idempotency keys", ErrUnsupported)
					return nil, rowErr
				}
				runs.add(&r)
				runAt := now.Add(r.Delay)
				if r.RunAt != nil {
					runAt = *r.RunAt
				}
				if !runAt.After(now) {
					due[r.Queue] = max(due[r.Queue], r.Priority)
				}
				if !sameBytes(r.Metadata, metaOf) {
					metaOf, meta = r.Metadata, bytesOrNil(r.Metadata)
				}
				return []any{r.Kind, r.Queue, int16(r.Priority), json.RawMessage(r.Payload), r.Correlation,
					int32(r.Attempts), jsonOrNil(r.Backoff), runAt, jsonOrNil(r.Auth), r.RunID, r.Period, meta, r.LimitKey}, nil
			})
			var err error
			if n, err = tx.CopyFrom(ctx, pgx.Identifier{JobsTable}, copyColumns, src); err != nil {
				return cmp.Or(rowErr, err)
			}
			if len(runs.ids) > 0 {
				if _, err := tx.Exec(ctx, copiedRunsSQL, runs.ids, runs.periods); err != nil {
					return err
				}
			}
			for q, top := range due {
				if _, err := tx.Exec(ctx, "SELECT pg_notify('"+JobsChannel+"', current_schema() || ':' || $1)", fmt.Sprintf("%s:%d", q, top)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && ctx.Err() != nil {
			// A cancelled COPY can leave the connection mid-protocol.
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
	return n, err
}

// runsSeen is a data-modifying WITH item that records the runs of the jobs
// of rel, a WITH item of inserted jobs, in sheaf_runs: it adds the rows of
// new runs, and clears the counts of finished runs that got a job. The
// rows of known runs are locked FOR KEY SHARE, which a roll-up's FOR
// UPDATE (KeepRunCounts) conflicts with and other inserts' locks do not:
// a roll-up counting the run waits for the insert to commit, so it sees
// the new job, and an insert that comes while a roll-up holds the row
// waits for it, then reads the counts it wrote (a lock returns the row's
// latest version) and clears them. Without the lock, an insert whose
// snapshot predates the counts would leave them standing over a job they
// did not count. The update takes only the rows whose counts it clears, so
// inserts into a busy run (released children) do not wait for each other.
func runsSeen(rel string) string {
	return `runs_added AS (
	INSERT INTO sheaf_runs (run_id, period, first_created)
	SELECT run_id, min(period), min(created_at) FROM ` + rel + ` WHERE run_id IS NOT NULL GROUP BY run_id
	ON CONFLICT (run_id) DO NOTHING
), runs_held AS MATERIALIZED (
	SELECT run_id, counts IS NOT NULL AS kept FROM sheaf_runs
	WHERE run_id IN (SELECT run_id FROM ` + rel + ` WHERE run_id IS NOT NULL)
	FOR KEY SHARE
), runs_reopened AS (
	UPDATE sheaf_runs SET counts = NULL
	WHERE run_id IN (SELECT run_id FROM runs_held WHERE kept)
)`
}

// copiedRunsSQL records the runs of copied jobs, given as arrays of run IDs
// and periods.
var copiedRunsSQL = `WITH copied AS (
	SELECT run_id, period, now() AS created_at FROM unnest($1::text[], $2::text[]) AS t(run_id, period)
), ` + runsSeen("copied") + `
SELECT 1`

// runsOf returns the distinct run IDs of jobs, in order, with each one's
// first period.
func runsOf(jobs []NewJob) (runs []string, periods []*string) {
	var f runsFound
	for i := range jobs {
		f.add(&jobs[i])
	}
	return f.ids, f.periods
}

// runsFound gathers the distinct run IDs of jobs, in order, with each
// one's first period.
type runsFound struct {
	ids     []string
	periods []*string
	seen    map[string]bool
}

func (f *runsFound) add(j *NewJob) {
	if j.RunID == nil || f.seen[*j.RunID] {
		return
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[*j.RunID] = true
	f.ids, f.periods = append(f.ids, *j.RunID), append(f.periods, j.Period)
}

// gather returns the n jobs row gives, for the stores that copy a slice.
func gather(n int, row func(i int) (NewJob, error)) ([]NewJob, error) {
	jobs := make([]NewJob, n)
	for i := range jobs {
		var err error
		if jobs[i], err = row(i); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// sameBytes reports whether a and b are the same slice.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// bytesOrNil is b as a COPY value: NULL for none.
func bytesOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func jsonOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// Analyze refreshes the statistics the claims' plans rest on: the table's
// size, and the columns a claim filters and sorts on, from a sample of
// analyzeTarget × 300 rows. A full ANALYZE (every column, 30,000 rows)
// cost a 100,000-job bulk a quarter of its time. A list of columns leaves
// autovacuum's count of changes alone, so autovacuum still analyzes the
// whole table soon after. The statements are one query string, so that
// they run as one transaction, which SET LOCAL lasts for.
func (s *postgres) Analyze(ctx context.Context) error {
	return s.gdb.WithContext(ctx).Exec(fmt.Sprintf("SET LOCAL default_statistics_target = %d; "+
		"ANALYZE sheaf_jobs (status, rescues, queue, priority, run_at, kind)", analyzeTarget)).Error
}

// analyzeTarget is Analyze's statistics target: ten values of each column,
// enough for a claim to tell a small table from a large one and QUEUED
// from the rest.
const analyzeTarget = 10

// skippedOf returns, in order, the places in jobs of the jobs with an
// idempotency key for which skip(i, first) is true, first telling whether
// job i is the first of jobs with its key.
func skippedOf(jobs []NewJob, skip func(i int, first bool) bool) []int {
	var out []int
	seen := make(map[string]bool, len(jobs))
	for i, j := range jobs {
		if j.Key == nil {
			continue
		}
		first := !seen[*j.Key]
		seen[*j.Key] = true
		if skip(i, first) {
			out = append(out, i)
		}
	}
	return out
}

// insertKeyed is InsertKeyed through a store's Insert, which reads the
// inserted rows back: their keys tell which jobs were skipped.
func insertKeyed(ctx context.Context, db *gorm.DB, jobs []NewJob, insert func(context.Context, *gorm.DB, []NewJob, any) error) ([]int, error) {
	var rows []struct{ IdempotencyKey *string }
	if err := insert(ctx, db, jobs, &rows); err != nil {
		return nil, err
	}
	inserted := make(map[string]bool, len(rows))
	for _, r := range rows {
		if r.IdempotencyKey != nil {
			inserted[*r.IdempotencyKey] = true
		}
	}
	return skippedOf(jobs, func(i int, first bool) bool { return !first || !inserted[*jobs[i].Key] }), nil
}

// InsertKeyed inserts jobs as Insert does, and returns the places in jobs
// of those it skipped.
func (s *sqlite) InsertKeyed(ctx context.Context, db *gorm.DB, jobs []NewJob) ([]int, error) {
	return insertKeyed(ctx, db, jobs, s.Insert)
}

// InsertKeyed inserts jobs as Insert does, and returns the places in jobs
// of those it skipped.
func (s *mysql) InsertKeyed(ctx context.Context, db *gorm.DB, jobs []NewJob) ([]int, error) {
	return insertKeyed(ctx, db, jobs, s.Insert)
}
