package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"
)

// The runner's statements on MariaDB. Without UPDATE ... RETURNING, a
// guarded write locks its rows first (SELECT ... FOR UPDATE), which tells
// which rows it changes, then updates them by ID, in one transaction.

const mysqlClaimColumns = `id, kind, queue, priority, payload, correlation_id, attempts, claims, rescues,
	max_attempts, backoff, created_at, started_at, auth, run_at, run_id, period, parent_ids, total,
	coalesce(meta, CAST(metadata AS BINARY))`

// mysqlConn is MariaDB's Conn: the pool's connections serve every loop.
type mysqlConn struct{ s *mysql }

func (s *mysql) Hold(bool) Conn { return mysqlConn{s} }

func (mysqlConn) DropOn(error) {}
func (mysqlConn) Close()       {}

// notIn is a condition that col is none of l, and its arguments.
func notIn(col string, l []string) (string, []any) {
	if len(l) == 0 {
		return "", nil
	}
	ph, args := placeholders(l)
	return " AND " + col + " NOT IN (" + ph + ")", args
}

// Claim locks the first due jobs of the queue, skipping those another
// claim has locked, through sheaf_jobs_claim in its order. From a cursor,
// it looks at higher priorities first if told to, then onward from the
// cursor, then at lower priorities, each only while jobs are still
// wanted (see claimFromSQL): InnoDB keeps the index entries of claimed
// jobs, marked deleted, until its purge reaches them, and a claim from
// the start steps over every one; on a busy queue that cost more than the
// claim's update.
func (c mysqlConn) Claim(ctx context.Context, cl Claim) ([]Claimed, error) {
	if cl.Limited {
		return c.s.claimLimited(ctx, cl, false, []string{cl.Queue})
	}
	closed, closedArgs := notIn("kind", cl.ClosedKinds)
	pick := func(tx *sql.Tx, n int, where string, args ...any) ([]int64, error) {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM sheaf_jobs FORCE INDEX (sheaf_jobs_claim)
			WHERE queue = ? AND status = 'QUEUED' AND rescues = 0 AND run_at <= `+mysqlNow+where+closed+`
			ORDER BY priority DESC, run_at, id LIMIT `+itoa(n)+` FOR UPDATE SKIP LOCKED`, append(append([]any{cl.Queue}, args...), closedArgs...)...)
		if err != nil {
			return nil, err
		}
		return scanIDs(rows)
	}
	return c.s.claim(ctx, func(tx *sql.Tx) ([]int64, error) {
		from := cl.From
		if from == nil {
			return pick(tx, cl.N, "")
		}
		at := mysqlTime(from.RunAt)
		var ids []int64
		for _, part := range []struct {
			skip  bool
			where string
			args  []any
		}{
			{!cl.Higher, " AND priority > ?", []any{from.Priority}},
			{false, " AND priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))", []any{from.Priority, at, at, from.ID}},
			{false, " AND priority < ?", []any{from.Priority}},
		} {
			if part.skip || len(ids) == cl.N {
				continue
			}
			more, err := pick(tx, cl.N-len(ids), part.where, part.args...)
			if err != nil {
				return nil, err
			}
			ids = append(ids, more...)
		}
		return ids, nil
	}, mysqlClaimSet, cl.Lease.Microseconds(), cl.Runner)
}

// mysqlClaimSet and mysqlClaimSuspectSet are what a claim and a suspect's
// claim set on their jobs; they take the lease (µs) and the runner.
const (
	mysqlClaimSet = `status = 'PROCESSING', attempts = attempts + 1, claims = claims + 1, started_at = ` + mysqlNow + `,
		locked_until = ` + mysqlNow + ` + INTERVAL ? MICROSECOND, locked_by = ?, output = NULL`
	mysqlClaimSuspectSet = `status = 'PROCESSING', claims = claims + 1, started_at = NULL,
		locked_until = ` + mysqlNow + ` + INTERVAL ? MICROSECOND, locked_by = ?, output = NULL`
)

func (c mysqlConn) ClaimSuspect(ctx context.Context, queues []string, lease time.Duration, runner string, closedKinds []string) ([]Claimed, error) {
	qs, args := placeholders(queues)
	closed, closedArgs := notIn("kind", closedKinds)
	return c.s.claim(ctx, func(tx *sql.Tx) ([]int64, error) {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM sheaf_jobs
			WHERE status = 'QUEUED' AND rescues > 0 AND queue IN (`+qs+`) AND run_at <= `+mysqlNow+closed+`
			ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, append(args, closedArgs...)...)
		if err != nil {
			return nil, err
		}
		return scanIDs(rows)
	}, mysqlClaimSuspectSet, lease.Microseconds(), runner)
}

// claim locks the IDs pick selects, sets set on them and reads them back,
// in one transaction.
func (s *mysql) claim(ctx context.Context, pick func(tx *sql.Tx) ([]int64, error), set string, setArgs ...any) (out []Claimed, err error) {
	return s.claimThen(ctx, pick, nil, set, setArgs...)
}

// claimThen is claim, running the statements then returns, if not nil,
// for the list of the IDs once set is set on them. The update, those
// statements and the read of the rows go in one batch.
func (s *mysql) claimThen(ctx context.Context, pick func(tx *sql.Tx) ([]int64, error), then func(list string) []mysqlStmt,
	set string, setArgs ...any) (out []Claimed, err error) {
	err = s.sqlTx(ctx, func(tx *sql.Tx) error {
		ids, err := pick(tx)
		if err != nil || len(ids) == 0 {
			return err
		}
		list := ints(ids)
		stmts := []mysqlStmt{{query: "UPDATE sheaf_jobs SET " + set + " WHERE id IN (" + list + ")", args: setArgs}}
		if then != nil {
			stmts = append(stmts, then(list)...)
		}
		read := mysqlStmt{query: "SELECT " + mysqlClaimColumns + " FROM sheaf_jobs WHERE id IN (" + list + ")",
			read: func(rows *sql.Rows) (err error) {
				out, err = readClaimed(rows, out)
				return err
			}}
		if err := s.batch(ctx, tx, append(stmts, read)...); err != nil {
			return err
		}
		// In pick's order, which a fair claim's turns set.
		place := make(map[int64]int, len(ids))
		for i, id := range ids {
			place[id] = i
		}
		slices.SortFunc(out, func(a, b Claimed) int { return cmp.Compare(place[a.ID], place[b.ID]) })
		return nil
	})
	return out, err
}

// readClaimed reads rows of mysqlClaimColumns into out, leaving rows open.
func readClaimed(rows *sql.Rows, out []Claimed) ([]Claimed, error) {
	for rows.Next() {
		var j Claimed
		var payload, backoff, auth sql.NullString
		var started sql.NullTime
		var meta sql.RawBytes
		if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Priority, &payload, &j.CorrelationID, &j.Attempts, &j.Claims, &j.Rescues,
			&j.MaxAttempts, &backoff, &j.CreatedAt, &started, &auth, &j.RunAt, &j.RunID, &j.Period, (*idList)(&j.ParentIDs), &j.Total,
			&meta); err != nil {
			return out, err
		}
		j.Payload, j.Backoff, j.Auth, j.Metadata = bytesOf(payload), bytesOf(backoff), bytesOf(auth), sharedBytes(out, meta)
		if started.Valid {
			j.StartedAt = &started.Time
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// guard is the condition that a row is one of claims keys of jobs ids.
func guard(ids, keys []int64) string {
	return "id IN (" + ints(ids) + ") AND " + mysqlKey + " IN (" + ints(keys) + ")"
}

// Complete completes the jobs still under the claims. Most often all are,
// and one UPDATE, whose count of rows found says so (a key is one job's),
// is all it takes. When it found fewer, it is rolled back, and the rows are
// locked first, to learn which the UPDATE changes.
func (c mysqlConn) Complete(ctx context.Context, ids, keys []int64) (out []int64, err error) {
	const set = `UPDATE sheaf_jobs SET status = 'COMPLETED', completed_at = ` + mysqlNow + `, locked_until = NULL, rescues = 0 WHERE `
	err = c.s.sqlTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, set+guard(ids, keys)+" AND status = 'PROCESSING'")
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
			return cmp.Or(err, errSomeNotFound)
		}
		out = slices.Clone(ids)
		return nil
	})
	switch {
	case err == nil:
		return out, nil
	case !errors.Is(err, errSomeNotFound):
		return nil, err
	}
	err = c.s.sqlTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id FROM sheaf_jobs WHERE "+guard(ids, keys)+" AND status = 'PROCESSING' FOR UPDATE")
		if err != nil {
			return err
		}
		if out, err = scanIDs(rows); err != nil || len(out) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, set+"id IN ("+ints(out)+")")
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errSomeNotFound rolls back a write that found fewer rows than it meant to.
var errSomeNotFound = errors.New("some rows not found")

func (c mysqlConn) CompleteLanded(ctx context.Context, ids, keys []int64) ([]int64, error) {
	return c.s.ids(ctx, "SELECT id FROM sheaf_jobs WHERE "+guard(ids, keys)+" AND status = 'COMPLETED'")
}

func (s *mysql) ids(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// Fail writes each failure, and records the attempts, in one transaction.
func (c mysqlConn) Fail(ctx context.Context, f Failures) (out []int64, err error) {
	err = c.s.sqlTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, claims, started_at FROM sheaf_jobs WHERE "+guard(f.IDs, f.Keys)+
			" AND status = 'PROCESSING' FOR UPDATE")
		if err != nil {
			return err
		}
		var attempts []attemptRow
		for rows.Next() {
			a := attemptRow{Runner: &f.Runner, Outcome: "failed"}
			var started sqlTime
			if err := rows.Scan(&a.Job, &a.Claim, &started); err != nil {
				rows.Close()
				return err
			}
			a.Started = started.ptr()
			attempts = append(attempts, a)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		at := map[int64]int{}
		for i, id := range f.IDs {
			at[id] = i
		}
		out = out[:0]
		for k, a := range attempts {
			i := at[a.Job]
			if f.Statuses[i] == "QUEUED" {
				attempts[k].Outcome = "retried"
			}
			attempts[k].Error = &f.Errors[i]
			if _, err := tx.ExecContext(ctx, `UPDATE sheaf_jobs SET status = ?,
				run_at = CASE WHEN ? = 'QUEUED' THEN `+mysqlNow+` + INTERVAL ? MICROSECOND ELSE run_at END,
				completed_at = CASE WHEN ? = 'QUEUED' THEN NULL ELSE `+mysqlNow+` END,
				last_error = ?, locked_until = NULL, locked_by = NULL, rescues = 0 WHERE id = ?`,
				f.Statuses[i], f.Statuses[i], f.Delays[i].Microseconds(), f.Statuses[i], f.Errors[i], a.Job); err != nil {
				return err
			}
			out = append(out, a.Job)
		}
		return recordMySQL(ctx, tx, attempts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c mysqlConn) FailLanded(ctx context.Context, f Failures) (out []int64, err error) {
	rows, err := c.s.db.QueryContext(ctx, "SELECT id, status, coalesce(last_error, '') FROM sheaf_jobs WHERE "+guard(f.IDs, f.Keys))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	at := map[int64]int{}
	for i, id := range f.IDs {
		at[id] = i
	}
	for rows.Next() {
		var id int64
		var status, msg string
		if err := rows.Scan(&id, &status, &msg); err != nil {
			return nil, err
		}
		if i := at[id]; status == f.Statuses[i] && msg == f.Errors[i] {
			out = append(out, id)
		}
	}
	return out, rows.Err()
}

// Renew renews the leases it can lock at once, and counts as renewed the
// claims whose rows another transaction holds (see renewSQL).
func (c mysqlConn) Renew(ctx context.Context, lease time.Duration, ids, keys []int64, runner string) (renewed, orphans []int64, err error) {
	err = c.s.sqlTx(ctx, func(tx *sql.Tx) error {
		held := guard(ids, keys) + " AND status = 'PROCESSING' AND locked_by = ?"
		rows, err := tx.QueryContext(ctx, "SELECT id FROM sheaf_jobs WHERE "+held+" FOR UPDATE SKIP LOCKED", runner)
		if err != nil {
			return err
		}
		free, err := scanIDs(rows)
		if err != nil {
			return err
		}
		if len(free) > 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE sheaf_jobs SET locked_until = "+mysqlNow+" + INTERVAL ? MICROSECOND WHERE id IN ("+
				ints(free)+")", lease.Microseconds()); err != nil {
				return err
			}
		}
		if rows, err = tx.QueryContext(ctx, "SELECT "+mysqlKey+" FROM sheaf_jobs WHERE "+held, runner); err != nil {
			return err
		}
		if renewed, err = scanIDs(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT `+mysqlKey+` FROM sheaf_jobs FORCE INDEX (sheaf_jobs_status)
			WHERE status = 'PROCESSING' AND locked_until IS NOT NULL AND locked_by = ? AND `+mysqlKey+` NOT IN (`+ints(keys)+`)`, runner)
		if err != nil {
			return err
		}
		orphans, err = scanIDs(rows)
		return err
	})
	return renewed, orphans, err
}

func (c mysqlConn) PutBack(ctx context.Context, keys []int64, runner string) (out []JobRef, err error) {
	ids := keyIDs(keys)
	var back []due
	err = c.s.sqlTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, kind, queue, priority, run_at, rescues FROM sheaf_jobs WHERE "+guard(ids, keys)+
			" AND status = 'PROCESSING' AND locked_by = ? FOR UPDATE", runner)
		if err != nil {
			return err
		}
		defer rows.Close()
		var locked []int64
		for rows.Next() {
			var j JobRef
			var d due
			if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &d.priority, &d.runAt, &d.rescues); err != nil {
				return err
			}
			d.queue = j.Queue
			out, back, locked = append(out, j), append(back, d), append(locked, j.ID)
		}
		if err := rows.Err(); err != nil || len(locked) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sheaf_jobs SET status = 'QUEUED',
			attempts = attempts - CASE WHEN rescues = 0 THEN 1 ELSE 0 END, locked_until = NULL, locked_by = NULL
			WHERE id IN (`+ints(locked)+")")
		return err
	})
	if err != nil {
		return nil, err
	}
	notifyHub(c.s.hub, back)
	return out, nil
}

// Requeue puts claims back in the queue, uncounting the attempts counted:
// first those whose rows no other transaction holds, at once, then the
// others as their rows come free, until ctx ends (see requeueSQL). It
// looks for them again and again (SKIP LOCKED), rather than waiting in
// the server for a row lock: MariaDB does not end a statement whose client
// has gone (go-sql-driver/mysql closes the connection when ctx ends), so a
// statement left waiting would hold a server thread, and then the row, up
// to its lock wait timeout after the put-back gave up.
func (s *mysql) Requeue(ctx context.Context, ids, keys []int64, counted []bool) ([]int64, error) {
	var out []int64
	for pause := requeuePause; ; pause = min(2*pause, requeuePauseMax) {
		put, err := s.requeue(ctx, ids, keys, counted)
		out = append(out, put...)
		if err != nil || len(put) == len(ids) {
			return out, err
		}
		// The rest are held by another transaction, or no longer the
		// claims' (completed, cancelled, rescued): wait for the held ones,
		// those the last commit shows still the claims' (those put back
		// are QUEUED).
		held, err := s.ids(ctx, "SELECT id FROM sheaf_jobs WHERE "+guard(ids, keys)+" AND status = 'PROCESSING'")
		if err != nil || len(held) == 0 {
			return out, err
		}
		var heldIDs, heldKeys []int64
		var heldCounted []bool
		for i, id := range ids {
			if slices.Contains(held, id) {
				heldIDs, heldKeys, heldCounted = append(heldIDs, id), append(heldKeys, keys[i]), append(heldCounted, counted[i])
			}
		}
		ids, keys, counted = heldIDs, heldKeys, heldCounted
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, ctx.Err()
		case <-t.C:
		}
	}
}

// requeuePause is how long Requeue first waits before it looks again for
// rows another transaction held; it doubles up to requeuePauseMax. Rows
// are held for the length of a transaction that completes or cancels the
// job, mostly milliseconds.
const (
	requeuePause    = 5 * time.Millisecond
	requeuePauseMax = 200 * time.Millisecond
)

// requeue is one pass of Requeue: it puts back the claims' jobs that no
// other transaction holds.
func (s *mysql) requeue(ctx context.Context, ids, keys []int64, counted []bool) (out []int64, err error) {
	var back []due
	err = s.sqlTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, queue, priority, run_at, rescues FROM sheaf_jobs WHERE "+guard(ids, keys)+
			" AND status = 'PROCESSING' FOR UPDATE SKIP LOCKED")
		if err != nil {
			return err
		}
		if out, back, err = scanDue(rows); err != nil || len(out) == 0 {
			return err
		}
		var uncount, keep []int64
		for i, id := range ids {
			if counted[i] {
				uncount = append(uncount, id)
			} else {
				keep = append(keep, id)
			}
		}
		for _, g := range []struct {
			ids  []int64
			less int
		}{{uncount, 1}, {keep, 0}} {
			if len(g.ids) == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sheaf_jobs SET status = 'QUEUED', attempts = attempts - ?,
				locked_until = NULL, locked_by = NULL WHERE id IN (`+ints(out)+`) AND id IN (`+ints(g.ids)+")", g.less); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	notifyHub(s.hub, back)
	return out, nil
}

// Rescue takes back, in one transaction, the jobs whose lease expired.
func (s *mysql) Rescue(ctx context.Context, runner string) (out []Rescued, err error) {
	var back []due
	err = s.sqlTx(ctx, func(tx *sql.Tx) error {
		// The PROCESSING jobs are the few that hold a lease: the index by
		// status finds them, and the expired ones are picked among them
		// by a read that locks nothing, then locked by ID and judged
		// again. A locking read through the index would lock each
		// PROCESSING row it passed, however briefly (READ COMMITTED lets
		// go of the ones that do not match), and a runner's renewal,
		// which passes locked rows by, would miss its live leases while
		// the rescue looked at them.
		expired, err := tx.QueryContext(ctx, `SELECT id FROM sheaf_jobs FORCE INDEX (sheaf_jobs_status)
			WHERE status = 'PROCESSING' AND locked_until < `+mysqlNow+` ORDER BY locked_until LIMIT 1000`)
		if err != nil {
			return err
		}
		candidates, err := scanIDs(expired)
		if err != nil || len(candidates) == 0 {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, coalesce(locked_by, '') FROM sheaf_jobs
			WHERE id IN (`+ints(candidates)+`) AND status = 'PROCESSING' AND locked_until < `+mysqlNow+` FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		lostBy := map[int64]string{}
		var ids []int64
		for rows.Next() {
			var id int64
			var by string
			if err := rows.Scan(&id, &by); err != nil {
				rows.Close()
				return err
			}
			lostBy[id], ids = by, append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		// MariaDB assigns left to right, each seeing the ones before: the
		// order keeps every expression on the values it means.
		if _, err := tx.ExecContext(ctx, `UPDATE sheaf_jobs SET
			attempts = CASE WHEN rescues = 0 THEN attempts - 1 ELSE attempts END,
			status = CASE WHEN rescues > 0 AND attempts >= max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
			completed_at = CASE WHEN status = 'FAILED' THEN `+mysqlNow+` END,
			rescues = rescues + 1,
			run_at = `+mysqlNow+`,
			last_error = CONCAT('lease expired: runner ', coalesce(locked_by, '?'),
				' did not renew it in time (it stopped, froze, or lost the database); rescued by runner ', ?),
			locked_until = NULL, locked_by = NULL
			WHERE id IN (`+ints(ids)+`)`, runner); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT id, kind, queue, status, attempts, max_attempts, correlation_id, last_error, rescues,
			priority, run_at, claims, started_at FROM sheaf_jobs WHERE id IN (`+ints(ids)+`) ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var attempts []attemptRow
		for rows.Next() {
			var j Rescued
			var d due
			var started sqlTime
			var claims int
			if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Status, &j.Attempts, &j.MaxAttempts, &j.CorrelationID,
				&j.LastError, &j.Rescues, &d.priority, &d.runAt, &claims, &started); err != nil {
				return err
			}
			j.LostBy = lostBy[j.ID]
			out = append(out, j)
			attempts = append(attempts, attemptRow{Job: j.ID, Claim: claims, Runner: &j.LostBy, Started: started.ptr(),
				Outcome: "rescued", Error: j.LastError})
			if j.Status == "QUEUED" {
				d.queue, d.rescues = j.Queue, j.Rescues
				back = append(back, d)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return recordMySQL(ctx, tx, attempts)
	})
	if err != nil {
		return nil, err
	}
	notifyHub(s.hub, back)
	return out, nil
}

func (s *mysql) StartSuspect(ctx context.Context, id int64, claims int) (attempts int, started time.Time, err error) {
	err = s.sqlTx(ctx, func(tx *sql.Tx) error {
		var was sql.NullTime
		if err := tx.QueryRowContext(ctx, "SELECT started_at FROM sheaf_jobs WHERE id = ? AND claims = ? AND status = 'PROCESSING' FOR UPDATE",
			id, claims).Scan(&was); err != nil {
			return err
		}
		if !was.Valid {
			if _, err := tx.ExecContext(ctx, "UPDATE sheaf_jobs SET attempts = attempts + 1, started_at = "+mysqlNow+" WHERE id = ?", id); err != nil {
				return err
			}
		}
		return tx.QueryRowContext(ctx, "SELECT attempts, started_at FROM sheaf_jobs WHERE id = ?", id).Scan(&attempts, &started)
	})
	return attempts, started, err
}

func (s *mysql) SetProgress(ctx context.Context, id int64, claims int, processed, total int64) (bool, error) {
	return s.update(ctx, id, claims, "processed = ?, total = ?", processed, total)
}

func (s *mysql) SetChunkProgress(ctx context.Context, id int64, claims int, processed, total int64, times string) (bool, error) {
	return s.update(ctx, id, claims, "processed = ?, total = ?, chunk_times = ?", processed, total, nullText(times))
}

func (s *mysql) SetOutput(ctx context.Context, id int64, claims int, output string) (bool, error) {
	return s.update(ctx, id, claims, "output = ?", output)
}

// update sets columns of job id while claim claims holds it. MariaDB
// counts the rows an UPDATE changed, not those it found (unless the
// connection asks for found rows), so a write of the values a row holds
// already is told from a lost claim by reading the row.
func (s *mysql) update(ctx context.Context, id int64, claims int, set string, args ...any) (bool, error) {
	const held = " WHERE id = ? AND claims = ? AND status = 'PROCESSING'"
	res, err := s.db.ExecContext(ctx, "UPDATE sheaf_jobs SET "+set+held, append(args, id, claims)...)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return n > 0, err
	}
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM sheaf_jobs"+held, id, claims).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (s *mysql) State(ctx context.Context, id int64) (status string, claims int, err error) {
	return stateIn(s.gdb.WithContext(ctx), id)
}

// execer runs a statement: a *sql.Tx, or a gorm transaction's pool.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// recordMySQL records attempts, finished now, in the history and drops
// the attempts that fall out of it, inside the caller's transaction.
func recordMySQL(ctx context.Context, db execer, attempts []attemptRow) error {
	if len(attempts) == 0 {
		return nil
	}
	args := make([]any, 0, 6*len(attempts))
	drop := make([]string, 0, len(attempts))
	dropArgs := make([]any, 0, 2*len(attempts))
	for _, a := range attempts {
		var started any
		if t, ok := a.Started.(*time.Time); ok && t != nil {
			started = mysqlTime(*t)
		}
		args = append(args, a.Job, a.Claim, a.Runner, started, a.Outcome, a.Error)
		drop = append(drop, "(job_id = ? AND claim <= ?)")
		dropArgs = append(dropArgs, a.Job, a.Claim-KeptAttempts)
	}
	row := "(?, ?, ?, ?, " + mysqlNow + ", ?, ?)"
	if _, err := db.ExecContext(ctx, `INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error) VALUES `+
		strings.Repeat(row+", ", len(attempts)-1)+row+" ON DUPLICATE KEY UPDATE job_id = job_id", args...); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "DELETE FROM sheaf_attempts WHERE "+strings.Join(drop, " OR "), dropArgs...)
	return err
}
