package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"
)

// The runner's statements on SQLite. Each write is one statement, or one
// transaction, in the process's turn to write; the claim key is Key in SQL.

const sqliteKey = "(id * 1048576 + claims % 1048576)"

const sqliteClaimColumns = `id, kind, queue, priority, payload, correlation_id, attempts, claims, rescues,
	max_attempts, backoff, created_at, started_at, auth, run_at, run_id, period, parent_ids, total,
	coalesce(meta, CAST(metadata AS BLOB))` // metadata: jobs enqueued before schema version 7

// sqliteClaimSQL claims like claimSQL: ?1 now, ?2 lease end, ?3 runner,
// ?4 queue, ?5 closed kinds (JSON), ?6 how many. Without dead index entries
// to step over, SQLite needs no cursor.
var sqliteClaimSQL = `
UPDATE sheaf_jobs SET status = 'PROCESSING', attempts = attempts + 1, claims = claims + 1, started_at = ?1,
	locked_until = ?2, locked_by = ?3, output = NULL
WHERE id IN (
	SELECT id FROM sheaf_jobs INDEXED BY sheaf_jobs_claim
	WHERE status = 'QUEUED' AND rescues = 0 AND queue = ?4 AND run_at <= ?1 AND NOT ` + inList("kind", "?5") + `
	ORDER BY priority DESC, run_at, id LIMIT ?6)
RETURNING ` + sqliteClaimColumns

// sqliteClaimSuspectSQL is claimSuspectSQL: ?4 is the queues (JSON).
var sqliteClaimSuspectSQL = `
UPDATE sheaf_jobs SET status = 'PROCESSING', claims = claims + 1, started_at = NULL,
	locked_until = ?2, locked_by = ?3, output = NULL
WHERE id IN (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND rescues > 0 AND ` + inList("queue", "?4") + ` AND run_at <= ?1 AND NOT ` + inList("kind", "?5") + `
	ORDER BY priority DESC, run_at, id LIMIT 1)
RETURNING ` + sqliteClaimColumns

// sqliteConn is SQLite's Conn. The pool's connections serve every loop
// alike: the writes take turns anyway, and SQLite's connections cost
// nothing to reach.
type sqliteConn struct{ s *sqlite }

func (s *sqlite) Hold(bool) Conn { return sqliteConn{s} }

func (sqliteConn) DropOn(error) {}
func (sqliteConn) Close()       {}

func jsonStrings(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func (c sqliteConn) Claim(ctx context.Context, cl Claim) ([]Claimed, error) {
	if cl.Limited {
		return c.s.claimLimited(ctx, cl, false, []string{cl.Queue})
	}
	t := now()
	return c.s.claimed(ctx, sqliteClaimSQL, sqliteTime(t), sqliteTime(t.Add(cl.Lease)), cl.Runner, cl.Queue,
		jsonStrings(cl.ClosedKinds), cl.N)
}

func (c sqliteConn) ClaimSuspect(ctx context.Context, queues []string, lease time.Duration, runner string, closedKinds []string) ([]Claimed, error) {
	t := now()
	return c.s.claimed(ctx, sqliteClaimSuspectSQL, sqliteTime(t), sqliteTime(t.Add(lease)), runner, jsonStrings(queues),
		jsonStrings(closedKinds))
}

func (s *sqlite) claimed(ctx context.Context, query string, args ...any) (out []Claimed, err error) {
	err = s.writing(ctx, func() error {
		rows, err := s.db.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = scanSQLiteClaimed(rows, false)
		return err
	})
	return out, err
}

// scanSQLiteClaimed reads the jobs a claim returns, and closes rows.
// Placed, each row ends in the job's place, and the jobs come out in
// their places: UPDATE ... RETURNING has no order of its own.
func scanSQLiteClaimed(rows *sql.Rows, placed bool) (out []Claimed, err error) {
	defer rows.Close()
	var places map[int64]int64
	for rows.Next() {
		var j Claimed
		var created, started, runAt sqlTime
		var payload, backoff, auth sql.NullString
		var meta sql.RawBytes
		var place int64
		dest := []any{&j.ID, &j.Kind, &j.Queue, &j.Priority, &payload, &j.CorrelationID, &j.Attempts, &j.Claims, &j.Rescues,
			&j.MaxAttempts, &backoff, &created, &started, &auth, &runAt, &j.RunID, &j.Period, (*idList)(&j.ParentIDs), &j.Total, &meta}
		if placed {
			dest = append(dest, &place)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		j.Payload, j.Backoff, j.Auth, j.Metadata = bytesOf(payload), bytesOf(backoff), bytesOf(auth), sharedBytes(out, meta)
		j.CreatedAt, j.StartedAt, j.RunAt = created.t, started.ptr(), runAt.t
		out = append(out, j)
		if placed {
			if places == nil {
				places = map[int64]int64{}
			}
			places[j.ID] = place
		}
	}
	if places != nil {
		slices.SortFunc(out, func(a, b Claimed) int { return cmp.Compare(places[a.ID], places[b.ID]) })
	}
	return out, rows.Err()
}

func bytesOf(s sql.NullString) []byte {
	if !s.Valid {
		return nil
	}
	return []byte(s.String)
}

func (c sqliteConn) Complete(ctx context.Context, ids, keys []int64) (out []int64, err error) {
	err = c.s.writing(ctx, func() error {
		out, err = c.s.ids(ctx, `UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = ?1, locked_until = NULL,
			rescues = 0 WHERE `+inList("id", "?2")+` AND `+inList(sqliteKey, "?3")+` AND status = 'PROCESSING' RETURNING id`,
			sqliteTime(now()), jsonIDs(ids), jsonIDs(keys))
		return err
	})
	return out, err
}

func (c sqliteConn) CompleteLanded(ctx context.Context, ids, keys []int64) ([]int64, error) {
	return c.s.ids(ctx, `SELECT id FROM sheaf_jobs WHERE `+inList("id", "?1")+` AND `+inList(sqliteKey, "?2")+
		` AND status = 'COMPLETED'`, jsonIDs(ids), jsonIDs(keys))
}

// ids runs a query that yields IDs.
func (s *sqlite) ids(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// failures writes f as a JSON array of objects, one per failure, for
// sqliteFailed: the time a retry is due is reckoned here.
func (f Failures) json(t time.Time) string {
	type row struct {
		ID     int64  `json:"id"`
		Key    int64  `json:"key"`
		Status string `json:"status"`
		RunAt  any    `json:"run_at"`
		Err    string `json:"err"`
	}
	rows := make([]row, len(f.IDs))
	for i := range f.IDs {
		rows[i] = row{f.IDs[i], f.Keys[i], f.Statuses[i], sqliteTime(t.Add(f.Delays[i])), f.Errors[i]}
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

// sqliteFailures reads Failures.json, bound to param, as a table d.
func sqliteFailures(param string) string {
	return `(SELECT value ->> 'id' AS id, value ->> 'key' AS key, value ->> 'status' AS status,
	value ->> 'run_at' AS run_at, value ->> 'err' AS err FROM json_each(` + param + `)) AS d`
}

// Fail writes the failures and records their attempts in one transaction.
func (c sqliteConn) Fail(ctx context.Context, f Failures) (out []int64, err error) {
	t := now()
	err = c.s.writing(ctx, func() error {
		tx, err := c.s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, `UPDATE sheaf_jobs AS j SET status = d.status,
			run_at = CASE WHEN d.status = 'QUEUED' THEN d.run_at ELSE j.run_at END,
			completed_at = CASE WHEN d.status = 'QUEUED' THEN NULL ELSE ?1 END,
			last_error = d.err, locked_until = NULL, locked_by = NULL, rescues = 0
			FROM `+sqliteFailures("?2")+`
			WHERE j.id = d.id AND (j.id * 1048576 + j.claims % 1048576) = d.key AND j.status = 'PROCESSING'
			RETURNING id, claims, started_at, status, last_error`, sqliteTime(t), f.json(t))
		if err != nil {
			return err
		}
		defer rows.Close()
		var attempts []attemptRow
		for rows.Next() {
			a := attemptRow{Runner: &f.Runner, Outcome: "failed"}
			var started sqlTime
			var status string
			if err := rows.Scan(&a.Job, &a.Claim, &started, &status, &a.Error); err != nil {
				return err
			}
			if status == "QUEUED" {
				a.Outcome = "retried"
			}
			a.Started = startedAt(started)
			out, attempts = append(out, a.Job), append(attempts, a)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := recordSQLite(tx, ctx, attempts, sqliteTime(t)); err != nil {
			return err
		}
		return tx.Commit()
	})
	return out, err
}

func (c sqliteConn) FailLanded(ctx context.Context, f Failures) ([]int64, error) {
	return c.s.ids(ctx, `SELECT j.id FROM sheaf_jobs AS j, `+sqliteFailures("?1")+`
		WHERE j.id = d.id AND (j.id * 1048576 + j.claims % 1048576) = d.key AND j.status = d.status AND j.last_error = d.err`,
		f.json(now()))
}

func (c sqliteConn) Renew(ctx context.Context, lease time.Duration, ids, keys []int64, runner string) (renewed, orphans []int64, err error) {
	err = c.s.writing(ctx, func() error {
		tx, err := c.s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, `UPDATE sheaf_jobs SET locked_until = ?1
			WHERE `+inList("id", "?2")+` AND `+inList(sqliteKey, "?3")+` AND status = 'PROCESSING' AND locked_by = ?4
			RETURNING `+sqliteKey, sqliteTime(now().Add(lease)), jsonIDs(ids), jsonIDs(keys), runner)
		if err != nil {
			return err
		}
		if renewed, err = scanIDs(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT `+sqliteKey+` FROM sheaf_jobs INDEXED BY sheaf_jobs_lease
			WHERE locked_until IS NOT NULL AND locked_by = ?1 AND status = 'PROCESSING' AND NOT `+inList(sqliteKey, "?2"),
			runner, jsonIDs(keys))
		if err != nil {
			return err
		}
		if orphans, err = scanIDs(rows); err != nil {
			return err
		}
		return tx.Commit()
	})
	return renewed, orphans, err
}

func (c sqliteConn) PutBack(ctx context.Context, keys []int64, runner string) (out []JobRef, err error) {
	ids := keyIDs(keys)
	var back []due
	err = c.s.writing(ctx, func() error {
		rows, err := c.s.db.QueryContext(ctx, `UPDATE sheaf_jobs SET status = 'QUEUED',
			attempts = attempts - CASE WHEN rescues = 0 THEN 1 ELSE 0 END, locked_until = NULL, locked_by = NULL
			WHERE `+inList("id", "?1")+` AND `+inList(sqliteKey, "?2")+` AND status = 'PROCESSING' AND locked_by = ?3
			RETURNING id, kind, queue, priority, run_at, rescues`, jsonIDs(ids), jsonIDs(keys), runner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j JobRef
			var d due
			var runAt sqlTime
			if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &d.priority, &runAt, &d.rescues); err != nil {
				return err
			}
			d.queue, d.runAt = j.Queue, runAt.t
			out, back = append(out, j), append(back, d)
		}
		return rows.Err()
	})
	c.s.notify(back)
	return out, err
}

func (s *sqlite) Requeue(ctx context.Context, ids, keys []int64, counted []bool) (out []int64, err error) {
	type row struct {
		ID      int64 `json:"id"`
		Key     int64 `json:"key"`
		Counted int   `json:"counted"`
	}
	rows := make([]row, len(ids))
	for i := range ids {
		rows[i] = row{ID: ids[i], Key: keys[i]}
		if counted[i] {
			rows[i].Counted = 1
		}
	}
	b, _ := json.Marshal(rows)
	var back []due
	err = s.writing(ctx, func() error {
		rows, err := s.db.QueryContext(ctx, `UPDATE sheaf_jobs AS j SET status = 'QUEUED', attempts = j.attempts - d.counted,
			locked_until = NULL, locked_by = NULL
			FROM (SELECT value ->> 'id' AS id, value ->> 'key' AS key, value ->> 'counted' AS counted FROM json_each(?1)) AS d
			WHERE j.id = d.id AND (j.id * 1048576 + j.claims % 1048576) = d.key AND j.status = 'PROCESSING'
			RETURNING id, queue, priority, run_at, rescues`, string(b))
		if err != nil {
			return err
		}
		out, back, err = scanDue(rows)
		return err
	})
	s.notify(back)
	return out, err
}

// scanDue reads rows of id, queue, priority, run_at, rescues, and closes
// them.
func scanDue(rows *sql.Rows) (ids []int64, jobs []due, err error) {
	defer rows.Close()
	for rows.Next() {
		var id int64
		var d due
		var runAt sqlTime
		if err := rows.Scan(&id, &d.queue, &d.priority, &runAt, &d.rescues); err != nil {
			return ids, jobs, err
		}
		d.runAt = runAt.t
		ids, jobs = append(ids, id), append(jobs, d)
	}
	return ids, jobs, rows.Err()
}

// Rescue is rescueSQL in two statements of one transaction: the first
// reads whose lease each job was under, the second takes the jobs back.
func (s *sqlite) Rescue(ctx context.Context, runner string) (out []Rescued, err error) {
	var back []due
	err = s.writing(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		t := sqliteTime(now())
		rows, err := tx.QueryContext(ctx, `UPDATE sheaf_jobs SET rescues = rescues WHERE id IN (
			SELECT id FROM sheaf_jobs INDEXED BY sheaf_jobs_lease
			WHERE locked_until IS NOT NULL AND locked_until < ?1 AND status = 'PROCESSING' ORDER BY locked_until LIMIT 1000)
			RETURNING id, coalesce(locked_by, '')`, t)
		if err != nil {
			return err
		}
		lostBy := map[int64]string{}
		var ids []int64
		defer rows.Close()
		for rows.Next() {
			var id int64
			var by string
			if err := rows.Scan(&id, &by); err != nil {
				return err
			}
			lostBy[id], ids = by, append(ids, id)
		}
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.QueryContext(ctx, `UPDATE sheaf_jobs SET
			attempts = CASE WHEN rescues = 0 THEN attempts - 1 ELSE attempts END,
			status = CASE WHEN rescues > 0 AND attempts >= max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
			completed_at = CASE WHEN rescues > 0 AND attempts >= max_attempts THEN ?1 END,
			rescues = rescues + 1,
			run_at = ?1,
			last_error = 'lease expired: runner ' || coalesce(locked_by, '?') ||
				' did not renew it in time (it stopped, froze, or lost the database); rescued by runner ' || ?2,
			locked_until = NULL, locked_by = NULL
			WHERE `+inList("id", "?3")+` AND status = 'PROCESSING'
			RETURNING id, kind, queue, status, attempts, max_attempts, correlation_id, last_error, rescues, priority, run_at,
				claims, started_at`,
			t, runner, jsonIDs(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		var attempts []attemptRow
		for rows.Next() {
			var j Rescued
			var d due
			var runAt, started sqlTime
			var claims int
			if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Status, &j.Attempts, &j.MaxAttempts, &j.CorrelationID,
				&j.LastError, &j.Rescues, &d.priority, &runAt, &claims, &started); err != nil {
				return err
			}
			j.LostBy = lostBy[j.ID]
			out = append(out, j)
			attempts = append(attempts, attemptRow{Job: j.ID, Claim: claims, Runner: &j.LostBy, Started: startedAt(started),
				Outcome: "rescued", Error: j.LastError})
			if j.Status == "QUEUED" {
				d.queue, d.runAt, d.rescues = j.Queue, runAt.t, j.Rescues
				back = append(back, d)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := recordSQLite(tx, ctx, attempts, t); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return nil, err
	}
	s.notify(back)
	return out, nil
}

func (s *sqlite) StartSuspect(ctx context.Context, id int64, claims int) (attempts int, started time.Time, err error) {
	err = s.writing(ctx, func() error {
		var st sqlTime
		err := s.db.QueryRowContext(ctx, `UPDATE sheaf_jobs SET attempts = attempts + CASE WHEN started_at IS NULL THEN 1 ELSE 0 END,
			started_at = coalesce(started_at, ?3)
			WHERE id = ?1 AND claims = ?2 AND status = 'PROCESSING' RETURNING attempts, started_at`,
			id, claims, sqliteTime(now())).Scan(&attempts, &st)
		started = st.t
		return err
	})
	return attempts, started, err
}

func (s *sqlite) SetProgress(ctx context.Context, id int64, claims int, processed, total int64) (bool, error) {
	return s.update(ctx, id, claims, "processed = ?3, total = ?4", processed, total)
}

func (s *sqlite) SetChunkProgress(ctx context.Context, id int64, claims int, processed, total int64, times string) (bool, error) {
	return s.update(ctx, id, claims, "processed = ?3, total = ?4, chunk_times = ?5", processed, total, nullText(times))
}

func (s *sqlite) SetOutput(ctx context.Context, id int64, claims int, output string) (bool, error) {
	return s.update(ctx, id, claims, "output = ?3", []byte(output))
}

// update sets columns of job id while claim claims holds it; set uses ?3
// on for args.
func (s *sqlite) update(ctx context.Context, id int64, claims int, set string, args ...any) (changed bool, err error) {
	err = s.writing(ctx, func() error {
		res, err := s.db.ExecContext(ctx, "UPDATE sheaf_jobs SET "+set+" WHERE id = ?1 AND claims = ?2 AND status = 'PROCESSING'",
			append([]any{id, claims}, args...)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n > 0
		return err
	})
	return changed, err
}

func (s *sqlite) State(ctx context.Context, id int64) (status string, claims int, err error) {
	return stateIn(s.gdb.WithContext(ctx), id)
}

// attemptRow is an attempt to record in the history, as recordSQLite
// reads it.
type attemptRow struct {
	Job     int64   `json:"job"`
	Claim   int     `json:"claim"`
	Runner  *string `json:"runner"`
	Started any     `json:"started"` // in timeLayout, or nil
	Outcome string  `json:"outcome"`
	Error   *string `json:"error"`
}

func startedAt(t sqlTime) any {
	if !t.valid {
		return nil
	}
	return sqliteTime(t.t)
}

// recordSQLite records attempts, finished at finished, in the history and
// drops the attempts that fall out of it, inside the caller's transaction.
func recordSQLite(db interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, ctx context.Context, attempts []attemptRow, finished any) error {
	if len(attempts) == 0 {
		return nil
	}
	b, err := json.Marshal(attempts)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error)
		SELECT value ->> 'job', value ->> 'claim', value ->> 'runner', value ->> 'started', ?2, value ->> 'outcome', value ->> 'error'
		FROM json_each(?1) WHERE true ON CONFLICT (job_id, claim) DO NOTHING`, string(b), finished); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `DELETE FROM sheaf_attempts WHERE EXISTS (SELECT 1 FROM json_each(?1)
		WHERE sheaf_attempts.job_id = value ->> 'job' AND sheaf_attempts.claim <= (value ->> 'claim') - ?2)`, string(b), KeptAttempts)
	return err
}
