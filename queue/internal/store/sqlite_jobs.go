package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Inserting, reading and managing jobs, schedules and dependency release
// on SQLite.

// sqliteInsertSQL inserts the jobs of a JSON array (?1), in its order, all
// created at ?2, skipping those whose idempotency key is taken.
const sqliteInsertSQL = `
INSERT INTO sheaf_jobs (kind, queue, priority, payload, idempotency_key, correlation_id, max_attempts, backoff,
	run_at, created_at, auth, run_id, period, parent_ids, meta, limit_key)
SELECT value ->> 'kind', value ->> 'queue', value ->> 'priority', CAST(value ->> 'payload' AS BLOB), value ->> 'key', value ->> 'corr',
	value ->> 'attempts', value ->> 'backoff', value ->> 'run_at', ?2, value ->> 'auth', value ->> 'run_id', value ->> 'period',
	value ->> 'parents', unhex(value ->> 'meta'), value ->> 'limit_key'
FROM json_each(?1) WHERE true ORDER BY key
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, queue, priority, run_at, rescues`

// insertJSON writes jobs as the JSON array sqliteInsertSQL reads, with
// their run times reckoned from t; parents, if any, are every job's.
func insertJSON(jobs []NewJob, t time.Time, parents []int64) (string, error) {
	type row struct {
		Kind     string  `json:"kind"`
		Queue    string  `json:"queue"`
		Priority int     `json:"priority"`
		Payload  string  `json:"payload"`
		Key      *string `json:"key"`
		Corr     *string `json:"corr"`
		Attempts int     `json:"attempts"`
		Backoff  *string `json:"backoff"`
		RunAt    any     `json:"run_at"`
		Auth     *string `json:"auth"`
		RunID    *string `json:"run_id"`
		Period   *string `json:"period"`
		Parents  any     `json:"parents"`
		Meta     *string `json:"meta"` // hex
		LimitKey *string `json:"limit_key"`
	}
	rows := make([]row, len(jobs))
	for i, j := range jobs {
		rows[i] = row{Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload, Key: j.Key, Corr: j.Correlation,
			Attempts: j.Attempts, Backoff: j.Backoff, RunAt: sqliteTime(runAt(j, t)), Auth: j.Auth, RunID: j.RunID, Period: j.Period,
			Parents: IDListValue(parents), LimitKey: j.LimitKey}
		if j.Metadata != nil {
			h := hex.EncodeToString(j.Metadata)
			rows[i].Meta = &h
		}
	}
	b, err := json.Marshal(rows)
	return string(b), err
}

func runAt(j NewJob, t time.Time) time.Time {
	if j.RunAt != nil {
		return *j.RunAt
	}
	return t.Add(j.Delay)
}

func (s *sqlite) Insert(ctx context.Context, db *gorm.DB, jobs []NewJob, dest any) error {
	return s.Tx(ctx, db, func(tx *gorm.DB) error {
		ids, err := s.insert(tx, jobs, nil)
		if err != nil {
			return err
		}
		return tx.Table(JobsTable).Select(sqliteJobColumns).Where(inList("id", "?"), jsonIDs(ids)).Order("id").Find(dest).Error
	})
}

// insert inserts jobs inside tx, skipping taken idempotency keys, wakes the
// runners, and returns the new jobs' IDs.
func (s *sqlite) insert(tx *gorm.DB, jobs []NewJob, parents []int64) ([]int64, error) {
	t := now()
	in, err := insertJSON(jobs, t, parents)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Raw(sqliteInsertSQL, in, sqliteTime(t)).Rows()
	if err != nil {
		return nil, err
	}
	ids, back, err := scanDue(rows)
	if err != nil {
		return nil, err
	}
	// Runners woken now wait for this transaction's commit: their claims
	// take the write lock it holds.
	s.notify(back)
	return ids, nil
}

func (*sqlite) Jobs(ctx context.Context, db *gorm.DB, f Filter, limit int, dest any) error {
	return readJobs(ctx, db, f, sqliteTime, sqliteJobColumns, limit, dest)
}

func (*sqlite) Count(ctx context.Context, db *gorm.DB, f Filter) (int64, error) {
	return countJobs(ctx, db, f, sqliteTime)
}

func (*sqlite) JobIDs(ctx context.Context, db *gorm.DB, f Filter) ([]int64, error) {
	return jobIDs(ctx, db, f, sqliteTime)
}

func (*sqlite) Ready(ctx context.Context, db *gorm.DB) (n int64, oldest time.Duration, err error) {
	t := now()
	var first sqlTime
	err = db.WithContext(ctx).Raw(`SELECT count(*), min(run_at) FROM sheaf_jobs WHERE `+queuedStatus+` AND run_at <= ?`,
		sqliteTime(t)).Row().Scan(&n, &first)
	if first.valid {
		oldest = t.Sub(first.t)
	}
	return n, oldest, err
}

// TypicalDuration reads the durations and takes their percentiles here:
// SQLite has no percentile_cont.
func (*sqlite) TypicalDuration(ctx context.Context, db *gorm.DB, kind string, before time.Time, history int) (Baseline, bool, error) {
	rows, err := db.WithContext(ctx).Raw(`SELECT started_at, completed_at FROM sheaf_jobs
		WHERE kind = ? AND status = 'COMPLETED' AND `+finishedStatuses+` AND started_at IS NOT NULL AND completed_at < ?
		ORDER BY completed_at DESC LIMIT ?`, kind, sqliteTime(before), history).Rows()
	if err != nil {
		return Baseline{}, false, err
	}
	defer rows.Close()
	var ds []time.Duration
	for rows.Next() {
		var start, end sqlTime
		if err := rows.Scan(&start, &end); err != nil {
			return Baseline{}, false, err
		}
		ds = append(ds, end.t.Sub(start.t))
	}
	if err := rows.Err(); err != nil || len(ds) == 0 {
		return Baseline{}, false, err
	}
	return baselineOf(ds), true, nil
}

// LockStatus writes the row (changing nothing) so that the transaction
// holds the write lock from here on, as FOR UPDATE would hold the row.
func (s *sqlite) LockStatus(tx *gorm.DB, id int64) (status string, found bool, err error) {
	err = tx.Raw("UPDATE sheaf_jobs SET status = status WHERE id = ? RETURNING status", id).Row().Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return status, err == nil, err
}

func (s *sqlite) Attempts(tx *gorm.DB, id int64) (attempts, max int, err error) {
	err = tx.Raw("SELECT attempts, max_attempts FROM sheaf_jobs WHERE id = ?", id).Row().Scan(&attempts, &max)
	return attempts, max, err
}

// CancelJobs first writes the rows, changing nothing, to hold the write
// lock and read their status, as FOR UPDATE would.
func (s *sqlite) CancelJobs(tx *gorm.DB, f Filter, limit int) ([]int64, error) {
	f.Newest = false
	sub := f.apply(tx.Session(&gorm.Session{NewDB: true}).Table(JobsTable).Select("id").
		Where("status IN ('QUEUED', 'PROCESSING')"), sqliteTime).Order("id").Limit(limit)
	rows, err := tx.Raw(`UPDATE sheaf_jobs SET status = status WHERE id IN (?)
		RETURNING id, status, claims, locked_by, started_at`, sub).Rows()
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
			a.Started, a.Outcome = startedAt(started), "cancelled"
			running = append(running, a)
		}
	}
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return nil, err
	}
	slices.Sort(ids)
	t := sqliteTime(now())
	if err := tx.Exec(`UPDATE sheaf_jobs SET status = 'CANCELLED', completed_at = ?, locked_until = NULL, locked_by = NULL
		WHERE `+inList("id", "?"), t, jsonIDs(ids)).Error; err != nil {
		return nil, err
	}
	if err := recordSQLite(tx.Statement.ConnPool, tx.Statement.Context, running, t); err != nil {
		return nil, err
	}
	// The runners are told once the transaction commits (see sqlite.Tx).
	if after := afterCommitOf(tx); after != nil {
		for _, a := range running {
			after.cancelled = append(after.cancelled, a.Job)
		}
	}
	return ids, nil
}

const sqliteRestart = `UPDATE sheaf_jobs SET status = 'QUEUED',
	max_attempts = CASE WHEN attempts = 0 THEN max_attempts ELSE attempts + max_attempts END,
	run_at = @now, started_at = NULL, completed_at = NULL, locked_until = NULL, locked_by = NULL, processed = 0`

func (s *sqlite) Retry(tx *gorm.DB, id int64) error {
	_, err := s.restart(tx, sqliteRestart+" WHERE id = @id RETURNING id, queue, priority, run_at, rescues",
		map[string]any{"now": sqliteTime(now()), "id": id})
	return err
}

func (s *sqlite) RunNow(tx *gorm.DB, id int64) error {
	at := sqliteTime(now())
	_, err := s.restart(tx, "UPDATE sheaf_jobs SET run_at = @now WHERE id = @id AND status = 'QUEUED' AND run_at > @now "+
		"RETURNING id, queue, priority, run_at, rescues", map[string]any{"now": at, "id": id})
	return err
}

func (s *sqlite) RetryFailed(tx *gorm.DB, f Filter, maxTotal int) (int64, error) {
	sub := f.apply(tx.Session(&gorm.Session{NewDB: true}).Table(JobsTable).Select("id").Where("status = 'FAILED'"), sqliteTime)
	n, err := s.restart(tx, sqliteRestart+" WHERE id IN (@sub) AND status = 'FAILED' AND attempts + max_attempts < @max "+
		"RETURNING id, queue, priority, run_at, rescues", map[string]any{"now": sqliteTime(now()), "sub": sub, "max": maxTotal})
	return n, err
}

// restart runs a restart statement and wakes the runners of its jobs.
func (s *sqlite) restart(tx *gorm.DB, query string, args map[string]any) (int64, error) {
	rows, err := tx.Raw(query, args).Rows()
	if err != nil {
		return 0, err
	}
	ids, back, err := scanDue(rows)
	if err == nil {
		s.notify(back)
	}
	return int64(len(ids)), err
}

// LockSchedule writes the row, changing nothing, to hold the write lock.
func (s *sqlite) LockSchedule(tx *gorm.DB, name string) (time.Time, bool, error) {
	var last sqlTime
	err := tx.Raw("UPDATE sheaf_schedules SET name = name WHERE name = ? RETURNING last_tick", name).Row().Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return last.t, err == nil, err
}

func (s *sqlite) AddSchedule(tx *gorm.DB, name string, last time.Time) error {
	return tx.Exec("INSERT INTO sheaf_schedules (name, last_tick, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
		name, sqliteTime(last), sqliteTime(now())).Error
}

func (s *sqlite) SetLastTick(tx *gorm.DB, name string, at time.Time) error {
	return tx.Exec("UPDATE sheaf_schedules SET last_tick = ?, updated_at = ? WHERE name = ?", sqliteTime(at), sqliteTime(now()), name).Error
}

func (s *sqlite) CompleteTx(tx *gorm.DB, id int64, claims int) (period, runID sql.NullString, completed bool, err error) {
	err = tx.Raw(`UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = ?, locked_until = NULL,
		rescues = 0 WHERE id = ? AND claims = ? AND status = 'PROCESSING' RETURNING period, run_id`,
		sqliteTime(now()), id, claims).Row().Scan(&period, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return period, runID, false, nil
	}
	return period, runID, err == nil, err
}

func (s *sqlite) StateIn(tx *gorm.DB, id int64) (status string, claims int, err error) {
	return stateIn(tx, id)
}

// LockGroup has nothing to do: the release's transaction holds SQLite's
// write lock since CompleteTx wrote, so releases run one at a time.
func (s *sqlite) LockGroup(*gorm.DB, string) error { return nil }

func (s *sqlite) PeriodParents(tx *gorm.DB, period string, kinds []string) ([]Parent, error) {
	return periodParents(tx, period, kinds)
}

func (s *sqlite) InsertChild(tx *gorm.DB, j NewJob, parents []int64) (Child, error) {
	ids, err := s.insert(tx, []NewJob{j}, parents)
	if err != nil {
		return Child{}, err
	}
	if len(ids) == 0 {
		return Child{}, sql.ErrNoRows
	}
	return Child{JobRef: JobRef{ID: ids[0], Kind: j.Kind, Queue: j.Queue}, Priority: j.Priority, RunID: j.RunID}, nil
}
