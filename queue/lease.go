package queue

// Leases: renewing the leases of the jobs a runner holds, putting back jobs
// held in its name that it does not run, and rescuing expired leases.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// renewSQL renews the leases of the claims a runner holds ($3, the claim
// keys of jobs $2; lease $1 milliseconds; runner $4) and returns their keys,
// and the keys of the other jobs locked in the runner's name (orphan true):
// claims that timed out on the runner's side but ran on the server (the
// statement was still on its way when the runner gave up), and jobs whose
// results or requeues could not be written. It changes nothing but leases,
// so that it is harmless if it, too, runs on the server after the runner
// gave up on it: putBackSQL puts orphans back, by key, once the runner has
// made sure that it does not hold them.
var renewSQL = `
WITH renewed AS (
	UPDATE sheaf_jobs j SET locked_until = now() + $1 * interval '1 millisecond'
	WHERE j.id = ANY($2) AND ` + claimKey("j") + ` = ANY($3) AND j.status = 'PROCESSING' AND j.locked_by = $4
	RETURNING ` + claimKey("j") + ` AS key
)
SELECT key, false FROM renewed
UNION ALL
SELECT ` + claimKey("j") + `, true FROM sheaf_jobs j
WHERE j.locked_until IS NOT NULL AND j.locked_by = $4 AND j.status = 'PROCESSING' AND NOT ` + claimKey("j") + ` = ANY($3)`

// putBackSQL puts back in the queue the claims $2 of jobs $1, locked in the
// name of runner $3, uncounting the attempt if the claim counted it (a
// suspect's counts only when it starts, and an orphan never started, or its
// handler has returned: see renewSQL). It returns the jobs it put back.
var putBackSQL = `
WITH back AS (
	UPDATE sheaf_jobs j SET status = 'QUEUED', attempts = j.attempts - CASE WHEN j.rescues = 0 THEN 1 ELSE 0 END,
		locked_until = NULL, locked_by = NULL
	WHERE j.id = ANY($1) AND ` + claimKey("j") + ` = ANY($2) AND j.status = 'PROCESSING' AND j.locked_by = $3
	RETURNING j.id, j.kind, j.queue, j.priority, j.run_at, j.status, j.rescues
), notified AS (` + notifyDueSQL("back") + `)
SELECT back.id, back.kind, back.queue FROM back, notified`

// keepLeases renews the leases of the jobs the runner holds every third of
// a lease, on a connection of its own. A renewal that fails is tried again
// at once and then with growing pauses, each try bounded by the statement
// timeout, so that a lease is lost only when the runner cannot reach the
// database for about the lease's length. A claim that failed asks for a
// renewal at once, to put back what it may have claimed after all.
func (r *Runner) keepLeases(ctx context.Context) {
	defer r.keeper.Done()
	conn := heldConn{db: r.sqlDB}
	defer conn.close()
	every := r.cfg.lease / 3
	timer := time.NewTimer(every)
	defer timer.Stop()
	var failingSince time.Time
	var pause time.Duration
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.reconcile:
		}
		err := r.renew(ctx, &conn)
		next := every
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !failingSince.IsZero() {
				r.log.Info("queue: lease renewal works again", "failing_for", time.Since(failingSince))
			}
			failingSince, pause, warned = time.Time{}, 0, false
		default:
			r.log.Debug("queue: lease renewal failed", "err", err)
			if failingSince.IsZero() {
				failingSince = time.Now()
				r.log.Warn("queue: lease renewal failed; trying again", "err", err)
			}
			if !warned && time.Since(failingSince) > r.cfg.lease {
				warned = true
				r.log.Error("queue: leases not renewed for a whole lease; other runners may rescue this runner's jobs",
					"failing_for", time.Since(failingSince), "err", err)
			}
			pause = min(max(2*pause, 20*time.Millisecond), r.timeouts.renewPause)
			next = pause
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// renew renews the held claims' leases, cancels the attempts whose jobs it
// could not renew (they have lost them), and puts back the runner's orphans
// (see renewSQL).
func (r *Runner) renew(ctx context.Context, conn *heldConn) error {
	r.mu.Lock()
	ids, keys := make([]int64, 0, len(r.held)), make([]int64, 0, len(r.held))
	exs := make(map[int64]*execution, len(r.held))
	for key, ex := range r.held {
		ids, keys, exs[key] = append(ids, ex.row.ID), append(keys, key), ex
	}
	r.mu.Unlock()
	var orphans []int64
	err := func() (err error) {
		ctx, cancel := context.WithTimeout(ctx, r.timeouts.renew)
		defer cancel()
		rows, err := conn.query(ctx, renewSQL, r.cfg.lease.Milliseconds(), ids, keys, r.cfg.runnerID)
		if err != nil {
			return err
		}
		defer func() { conn.failed(err) }()
		defer rows.Close()
		for rows.Next() {
			var key int64
			var orphan bool
			if err := rows.Scan(&key, &orphan); err != nil {
				return err
			}
			if orphan {
				orphans = append(orphans, key)
			} else {
				delete(exs, key)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return err
	}
	for _, ex := range exs {
		r.lost(ctx, ex)
	}
	return r.putBack(ctx, conn, orphans)
}

// putBack puts back the orphans that renew found, but only those that the
// runner still does not hold once no claim is in flight: a claim that had run
// on the server but not yet returned to the runner when renew looked is
// launched by now. A claim the runner gave up on is never launched, so the
// keys that are left stay orphans, and putting them back by key cannot touch
// a later claim of the same job.
func (r *Runner) putBack(ctx context.Context, conn *heldConn, orphans []int64) (err error) {
	r.claiming.Lock()
	r.mu.Lock()
	ids, keys := make([]int64, 0, len(orphans)), make([]int64, 0, len(orphans))
	for _, key := range orphans {
		if r.held[key] == nil {
			ids, keys = append(ids, key>>20), append(keys, key)
		}
	}
	r.mu.Unlock()
	r.claiming.Unlock()
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.renew)
	defer cancel()
	rows, err := conn.query(ctx, putBackSQL, ids, keys, r.cfg.runnerID)
	if err != nil {
		return err
	}
	defer func() { conn.failed(err) }()
	defer rows.Close()
	for rows.Next() {
		var id int64
		var kind, queue string
		if err := rows.Scan(&id, &kind, &queue); err != nil {
			return err
		}
		r.stats.requeued.Add(1)
		r.observe(Event{Type: EventRequeued, JobID: id, Kind: kind, Queue: queue})
		r.log.Warn("queue: put back a job claimed in this runner's name that it was not running (its claim timed out here but ran on the server, or its result could not be written)",
			"job_id", id, "kind", kind)
	}
	return rows.Err()
}

// lost handles an attempt whose row no longer names it: the job was
// cancelled (and the notification missed), or rescued (and perhaps claimed
// again). A running attempt is cancelled with the reason.
func (r *Runner) lost(ctx context.Context, ex *execution) {
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	st, claims, err := ex.now(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return // unsure; look again at the next renewal
	}
	if st == StatusCancelled && claims == ex.row.Claims {
		ex.cancel(ErrCancelled)
	} else {
		ex.cancel(ErrLeaseLost)
	}
}

// rescueSQL takes jobs whose lease expired back from their runner ($1 is
// the rescuing runner): see rescue.
var rescueSQL = `
WITH expired AS (
	SELECT id, locked_by FROM sheaf_jobs
	WHERE status = 'PROCESSING' AND locked_until < now()
	ORDER BY locked_until
	LIMIT 1000
	FOR UPDATE SKIP LOCKED
), rescued AS (
	UPDATE sheaf_jobs j SET
		attempts = CASE WHEN j.rescues = 0 THEN j.attempts - 1 ELSE j.attempts END,
		status = CASE WHEN j.rescues > 0 AND j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
		completed_at = CASE WHEN j.rescues > 0 AND j.attempts >= j.max_attempts THEN now() END,
		rescues = j.rescues + 1,
		run_at = now(),
		last_error = 'lease expired: runner ' || coalesce(j.locked_by, '?') ||
			' did not renew it in time (it stopped, froze, or lost the database); rescued by runner ' || $1,
		locked_until = NULL, locked_by = NULL
	FROM expired WHERE j.id = expired.id
	RETURNING j.id, j.kind, j.queue, j.status, j.attempts, j.max_attempts, j.correlation_id, j.priority, j.run_at,
		j.last_error, j.rescues, expired.locked_by AS lost_by
), notified AS (` + notifyDueSQL("rescued") + `)
SELECT rescued.id, rescued.kind, rescued.queue, rescued.status, rescued.attempts, rescued.max_attempts, rescued.correlation_id,
	rescued.last_error, rescued.rescues, rescued.lost_by
FROM rescued, notified`

// rescueLoop rescues expired leases every WithRescueInterval.
func (r *Runner) rescueLoop(ctx context.Context) {
	defer r.keeper.Done()
	t := time.NewTicker(r.cfg.rescueEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.rescue(ctx)
		}
	}
}

// rescue takes back jobs whose lease expired. A job rescued for the first
// time since an attempt of it last finished goes back to the queue with that
// attempt uncounted: its runner died (or froze, or lost the database) while
// it held other jobs too, so which one killed it, if any did, is not known.
// It comes back a suspect, which runners run on their own and count the
// attempts of as they start, so a suspect that is rescued again has used
// its attempt, and fails once it has used them all (reporting EventFailed
// too, for dead-letter observers). Any runner rescues any runner's jobs;
// SKIP LOCKED keeps two rescuers from fighting.
func (r *Runner) rescue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, rescueSQL, r.cfg.runnerID)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("queue: rescue failed", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var row JobRecord
		var lostBy sql.NullString
		if err := rows.Scan(&row.ID, &row.Kind, &row.Queue, &row.Status, &row.Attempts, &row.MaxAttempts, &row.CorrelationID,
			&row.LastError, &row.Rescues, &lostBy); err != nil {
			r.log.Error("queue: rescue failed", "err", err)
			return
		}
		r.stats.rescued.Add(1)
		ex := &execution{row: row}
		r.observe(ex.event(EventRescued))
		r.jobLogger(&row).Warn("queue: rescued a job whose lease expired", "lost_by", lostBy.String, "rescued_by", r.cfg.runnerID,
			"now", row.Status, "rescues", row.Rescues)
		if row.Status == StatusFailed {
			r.stats.failed.Add(1)
			ev := ex.event(EventFailed)
			ev.Err = fmt.Errorf("%w: %s", ErrLeaseLost, *row.LastError)
			r.observe(ev)
			r.jobLogger(&row).Error("queue: job failed for good", "err", ev.Err)
		}
	}
	if err := rows.Err(); err != nil && ctx.Err() == nil {
		r.log.Error("queue: rescue failed", "err", err)
	}
}
