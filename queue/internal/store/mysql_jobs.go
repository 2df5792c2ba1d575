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
	"gorm.io/gorm/clause"
)

// Inserting, reading and managing jobs, schedules and dependency release
// on MariaDB.

const mysqlInsertColumns = `INSERT INTO sheaf_jobs (kind, queue, priority, payload, idempotency_key, correlation_id,
	max_attempts, backoff, run_at, created_at, auth, run_id, period, parent_ids, meta, limit_key) VALUES `

// mysqlInsertRow is one row of mysqlInsertColumns: run_at is the row's,
// or now plus its delay, by the server's clock.
const mysqlInsertRow = "(?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, " + mysqlNow + " + INTERVAL ? MICROSECOND), " + mysqlNow + ", ?, ?, ?, ?, ?, ?)"

// mysqlInsertBatch is how many rows one INSERT writes: 16 parameters each,
// well within the protocol's 65,535.
const mysqlInsertBatch = 2000

func mysqlInsertArgs(args []any, j NewJob, parents any) []any {
	var at any
	if j.RunAt != nil {
		at = mysqlTime(*j.RunAt)
	}
	var meta any
	if j.Metadata != nil {
		meta = j.Metadata
	}
	return append(args, j.Kind, j.Queue, j.Priority, j.Payload, j.Key, j.Correlation, j.Attempts, j.Backoff,
		at, j.Delay.Microseconds(), j.Auth, j.RunID, j.Period, parents, meta, j.LimitKey)
}

func (s *mysql) Insert(ctx context.Context, db *gorm.DB, jobs []NewJob, dest any) error {
	return s.Tx(ctx, db, func(tx *gorm.DB) error {
		ids, err := s.insert(tx, jobs, nil)
		if err != nil {
			return err
		}
		return tx.Table(JobsTable).Select(mysqlJobColumns).Where("id IN (" + ints(ids) + ")").Order("id").Find(dest).Error
	})
}

var mysqlJobColumns = jobColumns("CAST(metadata AS BINARY)")

// insert inserts jobs inside tx, skipping those whose idempotency key is
// taken (by an earlier job, or an earlier one of jobs), tells the runners,
// and returns the new jobs' IDs in order. The taken keys are read first: a
// job that another transaction inserts with one of the keys meanwhile
// makes the INSERT fail on the unique index, once that transaction
// commits, and the keys are read again. (INSERT IGNORE would skip them,
// but would make every other error of the rows a warning too.)
func (s *mysql) insert(tx *gorm.DB, jobs []NewJob, parents []int64) ([]int64, error) {
	var parentList any
	if parents != nil {
		parentList = IDListValue(parents)
	}
	for try := 0; ; try++ {
		todo, err := untaken(tx, jobs)
		if err != nil {
			return nil, err
		}
		var ids []int64
		var back []due
		err = tx.Transaction(func(tx *gorm.DB) error {
			for chunk := range slices.Chunk(todo, mysqlInsertBatch) {
				args := make([]any, 0, 16*len(chunk))
				for _, j := range chunk {
					args = mysqlInsertArgs(args, j, parentList)
				}
				rows, err := tx.Raw(mysqlInsertColumns+strings.Repeat(mysqlInsertRow+", ", len(chunk)-1)+mysqlInsertRow+
					" RETURNING id, queue, priority, run_at, rescues", args...).Rows()
				if err != nil {
					return err
				}
				i, b, err := scanDue(rows)
				if err != nil {
					return err
				}
				ids, back = append(ids, i...), append(back, b...)
			}
			return nil
		})
		if isDuplicate(err) && try < 3 {
			continue
		}
		if err == nil && len(ids) > 0 {
			err = runsSeenMySQL(tx.Statement.Context, tx.Statement.ConnPool, todo)
		}
		if err != nil {
			return nil, err
		}
		s.tell(tx, back)
		return ids, nil
	}
}

// runsSeenMySQL gives the runs of jobs, just inserted, their rows, and
// clears the counts of those that had finished. It reads the rows first,
// so that it writes, and locks exclusively, only those it changes: inserts
// into a busy run do not wait for each other. The read is a locking one
// (shared, as on PostgreSQL; see runsSeen): it reads the latest counts,
// not the transaction's snapshot, waits for a roll-up counting the run,
// and makes a roll-up wait for the insert. Two inserts that add a run at
// once meet on its key, and the second clears the counts, which are not
// there yet.
func runsSeenMySQL(ctx context.Context, db execer, jobs []NewJob) error {
	runs, periods := runsOf(jobs)
	if len(runs) == 0 {
		return nil
	}
	q, ok := db.(interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	})
	if !ok {
		return fmt.Errorf("runs: cannot read through %T", db)
	}
	ph, args := placeholders(runs)
	rows, err := q.QueryContext(ctx, "SELECT run_id, counts IS NOT NULL FROM "+RunsTable+" WHERE run_id IN ("+ph+") LOCK IN SHARE MODE", args...)
	if err != nil {
		return err
	}
	known := map[string]bool{} // run: has counts
	for rows.Next() {
		var run string
		var counted bool
		if err := rows.Scan(&run, &counted); err != nil {
			rows.Close()
			return err
		}
		known[run] = counted
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var add []any
	var reopen []string
	for i, run := range runs {
		counted, ok := known[run]
		switch {
		case !ok:
			add = append(add, run, periods[i])
		case counted:
			reopen = append(reopen, run)
		}
	}
	if len(add) > 0 {
		row := "(?, ?, " + mysqlNow + ")"
		if _, err := db.ExecContext(ctx, "INSERT INTO "+RunsTable+" (run_id, period, first_created) VALUES "+
			strings.Repeat(row+", ", len(add)/2-1)+row+" ON DUPLICATE KEY UPDATE counts = NULL", add...); err != nil {
			return err
		}
	}
	if len(reopen) > 0 {
		ph, args := placeholders(reopen)
		if _, err := db.ExecContext(ctx, "UPDATE "+RunsTable+" SET counts = NULL WHERE run_id IN ("+ph+")", args...); err != nil {
			return err
		}
	}
	return nil
}

// untaken returns jobs less those whose idempotency key a job has already,
// or an earlier one of jobs.
func untaken(tx *gorm.DB, jobs []NewJob) ([]NewJob, error) {
	var keys []string
	for _, j := range jobs {
		if j.Key != nil {
			keys = append(keys, *j.Key)
		}
	}
	if len(keys) == 0 {
		return jobs, nil
	}
	taken := map[string]bool{}
	for chunk := range slices.Chunk(keys, mysqlInsertBatch) {
		var found []string
		if err := tx.Raw("SELECT idempotency_key FROM sheaf_jobs WHERE idempotency_key IN ?", chunk).Scan(&found).Error; err != nil {
			return nil, err
		}
		for _, k := range found {
			taken[k] = true
		}
	}
	out := make([]NewJob, 0, len(jobs))
	for _, j := range jobs {
		if j.Key != nil {
			if taken[*j.Key] {
				continue
			}
			taken[*j.Key] = true
		}
		out = append(out, j)
	}
	return out, nil
}

func (*mysql) Jobs(ctx context.Context, db *gorm.DB, f Filter, limit int, dest any) error {
	return readJobs(ctx, db, f, mysqlTime, mysqlJobColumns, limit, dest)
}

func (*mysql) Count(ctx context.Context, db *gorm.DB, f Filter) (int64, error) {
	return countJobs(ctx, db, f, mysqlTime)
}

func (*mysql) JobIDs(ctx context.Context, db *gorm.DB, f Filter) ([]int64, error) {
	return jobIDs(ctx, db, f, mysqlTime)
}

func (*mysql) Ready(ctx context.Context, db *gorm.DB) (n int64, oldest time.Duration, err error) {
	var us sql.NullInt64
	err = db.WithContext(ctx).Raw(`SELECT count(*), TIMESTAMPDIFF(MICROSECOND, min(run_at), `+mysqlNow+`) FROM sheaf_jobs
		WHERE `+queuedStatus+` AND run_at <= `+mysqlNow).Row().Scan(&n, &us)
	if us.Valid {
		oldest = time.Duration(us.Int64) * time.Microsecond
	}
	return n, oldest, err
}

// TypicalDuration takes the percentiles here, of the durations the server
// computes.
func (*mysql) TypicalDuration(ctx context.Context, db *gorm.DB, kind string, before time.Time, history int) (Baseline, bool, error) {
	var us []int64
	err := db.WithContext(ctx).Raw(`SELECT TIMESTAMPDIFF(MICROSECOND, started_at, completed_at) FROM sheaf_jobs
		WHERE kind = ? AND status = 'COMPLETED' AND started_at IS NOT NULL AND completed_at < ?
		ORDER BY completed_at DESC LIMIT ?`, kind, mysqlTime(before), history).Scan(&us).Error
	if err != nil || len(us) == 0 {
		return Baseline{}, false, err
	}
	ds := make([]time.Duration, len(us))
	for i, u := range us {
		ds[i] = time.Duration(u) * time.Microsecond
	}
	return baselineOf(ds), true, nil
}

func (*mysql) LockStatus(tx *gorm.DB, id int64) (status string, found bool, err error) {
	err = tx.Raw("SELECT status FROM sheaf_jobs WHERE id = ? FOR UPDATE", id).Row().Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return status, err == nil, err
}

func (*mysql) Attempts(tx *gorm.DB, id int64) (attempts, max int, err error) {
	err = tx.Raw("SELECT attempts, max_attempts FROM sheaf_jobs WHERE id = ?", id).Row().Scan(&attempts, &max)
	return attempts, max, err
}

// CancelJobs locks the jobs first, reading their status, then cancels
// them by ID.
func (s *mysql) CancelJobs(tx *gorm.DB, f Filter, limit int) ([]int64, error) {
	f.Newest = false
	q := f.apply(tx.Session(&gorm.Session{NewDB: true}).WithContext(tx.Statement.Context).Table(JobsTable).
		Select("id, status, claims, locked_by, started_at").Where("status IN ('QUEUED', 'PROCESSING')"), mysqlTime).
		Order("id").Clauses(clause.Locking{Strength: "UPDATE"})
	if limit > 0 {
		q = q.Limit(limit)
	}
	rows, err := q.Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	var running []attemptRow
	for rows.Next() {
		var a attemptRow
		var status string
		var started sqlTime
		if err := rows.Scan(&a.Job, &status, &a.Claim, &a.Runner, &started); err != nil {
			return nil, err
		}
		ids = append(ids, a.Job)
		if status == "PROCESSING" {
			a.Started, a.Outcome = started.ptr(), "cancelled"
			running = append(running, a)
		}
	}
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return nil, err
	}
	rows.Close()
	if err := tx.Exec(`UPDATE sheaf_jobs SET status = 'CANCELLED', completed_at = ` + mysqlNow + `, locked_until = NULL,
		locked_by = NULL WHERE id IN (` + ints(ids) + `)`).Error; err != nil {
		return nil, err
	}
	if err := recordMySQL(tx.Statement.Context, tx.Statement.ConnPool, running); err != nil {
		return nil, err
	}
	if after := afterCommitOf(tx); after != nil {
		for _, a := range running {
			after.cancelled = append(after.cancelled, a.Job)
		}
	}
	return ids, nil
}

const mysqlRestart = `UPDATE sheaf_jobs SET status = 'QUEUED',
	max_attempts = CASE WHEN attempts = 0 THEN max_attempts ELSE attempts + max_attempts END,
	run_at = ` + mysqlNow + `, started_at = NULL, completed_at = NULL, locked_until = NULL, locked_by = NULL, processed = 0`

func (s *mysql) Retry(tx *gorm.DB, id int64) error {
	return s.restart(tx, []int64{id}, mysqlRestart)
}

func (s *mysql) RunNow(tx *gorm.DB, id int64) error {
	var ids []int64
	if err := tx.Raw("SELECT id FROM sheaf_jobs WHERE id = ? AND status = 'QUEUED' AND run_at > "+mysqlNow+" FOR UPDATE", id).
		Scan(&ids).Error; err != nil {
		return err
	}
	return s.restart(tx, ids, "UPDATE sheaf_jobs SET run_at = "+mysqlNow)
}

func (s *mysql) RetryFailed(tx *gorm.DB, f Filter, maxTotal int) (int64, error) {
	var ids []int64
	err := f.apply(tx.Session(&gorm.Session{NewDB: true}).WithContext(tx.Statement.Context).Table(JobsTable).Select("id").
		Where("status = 'FAILED' AND attempts + max_attempts < ?", maxTotal), mysqlTime).
		Clauses(clause.Locking{Strength: "UPDATE"}).Scan(&ids).Error
	if err != nil {
		return 0, err
	}
	return int64(len(ids)), s.restart(tx, ids, mysqlRestart)
}

// restart runs update on jobs ids, locked, and wakes their runners.
func (s *mysql) restart(tx *gorm.DB, ids []int64, update string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := tx.Exec(update + " WHERE id IN (" + ints(ids) + ")").Error; err != nil {
		return err
	}
	// A retried job reopens its run (see sheaf_runs).
	if err := tx.Exec("UPDATE " + RunsTable + " SET counts = NULL WHERE counts IS NOT NULL AND run_id IN (SELECT run_id FROM " +
		JobsTable + " WHERE id IN (" + ints(ids) + ") AND run_id IS NOT NULL)").Error; err != nil {
		return err
	}
	rows, err := tx.Raw("SELECT id, queue, priority, run_at, rescues FROM sheaf_jobs WHERE id IN (" + ints(ids) + ")").Rows()
	if err != nil {
		return err
	}
	_, back, err := scanDue(rows)
	if err == nil {
		s.tell(tx, back)
	}
	return err
}

func (*mysql) LockSchedule(tx *gorm.DB, name string) (time.Time, bool, error) {
	var last time.Time
	err := tx.Raw("SELECT last_tick FROM sheaf_schedules WHERE name = ? FOR UPDATE", name).Row().Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return last, err == nil, err
}

func (*mysql) AddSchedule(tx *gorm.DB, name string, last time.Time) error {
	return tx.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES (?, ?) ON DUPLICATE KEY UPDATE name = name",
		name, mysqlTime(last)).Error
}

func (*mysql) SetLastTick(tx *gorm.DB, name string, at time.Time) error {
	return tx.Exec("UPDATE sheaf_schedules SET last_tick = ?, updated_at = "+mysqlNow+" WHERE name = ?", mysqlTime(at), name).Error
}

func (*mysql) CompleteTx(tx *gorm.DB, id int64, claims int) (period, runID sql.NullString, completed bool, err error) {
	err = tx.Raw(`SELECT period, run_id FROM sheaf_jobs WHERE id = ? AND claims = ? AND status = 'PROCESSING' FOR UPDATE`,
		id, claims).Row().Scan(&period, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return period, runID, false, nil
	}
	if err != nil {
		return period, runID, false, err
	}
	err = tx.Exec(`UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = `+mysqlNow+`, locked_until = NULL, rescues = 0
		WHERE id = ?`, id).Error
	return period, runID, err == nil, err
}

func (*mysql) StateIn(tx *gorm.DB, id int64) (status string, claims int, err error) {
	return stateIn(tx, id)
}

func (*mysql) PeriodParents(tx *gorm.DB, period string, kinds []string) ([]Parent, error) {
	return periodParents(tx, period, kinds)
}

func (s *mysql) InsertChild(tx *gorm.DB, j NewJob, parents []int64) (Child, error) {
	ids, err := s.insert(tx, []NewJob{j}, parents)
	if err != nil {
		return Child{}, err
	}
	if len(ids) == 0 {
		return Child{}, sql.ErrNoRows
	}
	return Child{JobRef: JobRef{ID: ids[0], Kind: j.Kind, Queue: j.Queue}, Priority: j.Priority, RunID: j.RunID}, nil
}

// CopyRows is Copy of the jobs row gives, all prepared first.
func (s *mysql) CopyRows(ctx context.Context, n int, row func(i int) (NewJob, error)) (int64, error) {
	jobs, err := gather(n, row)
	if err != nil {
		return 0, err
	}
	return s.Copy(ctx, jobs)
}

// Copy loads jobs with LOAD DATA LOCAL INFILE (see load), in one
// transaction, or, where the driver's readers are not registered or the
// server refuses the load, inserts them in multi-row INSERTs of
// mysqlCopyBatch rows.
func (s *mysql) Copy(ctx context.Context, jobs []NewJob) (int64, error) {
	for _, j := range jobs {
		if j.Key != nil {
			return 0, fmt.Errorf("%w: Copy takes no idempotency keys", ErrUnsupported)
		}
	}
	n, err := int64(0), errors.New("not loaded")
	if MySQLReaders.Register != nil && !s.noInfile.Load() {
		err = s.sqlTx(ctx, func(tx *sql.Tx) error {
			if err := s.load(ctx, tx, jobs); err != nil {
				return err
			}
			return runsSeenMySQL(ctx, tx, jobs)
		})
		if err == nil {
			n = int64(len(jobs))
			s.loads.Add(1)
		} else if ctx.Err() != nil {
			return 0, err
		}
	}
	if err != nil {
		err = s.sqlTx(ctx, func(tx *sql.Tx) error {
			for chunk := range slices.Chunk(jobs, mysqlCopyBatch) {
				args := make([]any, 0, 16*len(chunk))
				for _, j := range chunk {
					args = mysqlInsertArgs(args, j, nil)
				}
				res, err := tx.ExecContext(ctx, mysqlInsertColumns+strings.Repeat(mysqlInsertRow+", ", len(chunk)-1)+mysqlInsertRow, args...)
				if err != nil {
					return err
				}
				c, err := res.RowsAffected()
				if err != nil {
					return err
				}
				n += c
			}
			return runsSeenMySQL(ctx, tx, jobs)
		})
	}
	if err != nil {
		return 0, err
	}
	d := dueSet{}
	t := now()
	for _, j := range jobs {
		d.add(j.Queue, j.Priority, runAt(j, t))
	}
	notifyHub(s.hub, d.list())
	return n, nil
}

// mysqlCopyBatch is how many rows one INSERT of Copy writes.
const mysqlCopyBatch = 2000
