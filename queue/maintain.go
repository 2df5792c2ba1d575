package queue

// Maintenance: notifications, lease renewal and rescue.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// listen keeps a connection LISTENing for new jobs and cancellations,
// reconnecting when it breaks. Polling covers the gaps.
func (r *Runner) listen(ctx context.Context) {
	defer r.loops.Done()
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("queue: listener connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *Runner) listenOnce(ctx context.Context) error {
	conn, err := r.sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("queue: the listener needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		var schema string
		if err := pc.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return err
		}
		if _, err := pc.Exec(ctx, "LISTEN sheaf_jobs; LISTEN sheaf_cancel"); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		r.wakeFetch() // jobs may have arrived while the listener was down
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection was listening; never hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			rest, ours := strings.CutPrefix(n.Payload, schema+":")
			if !ours {
				continue // another schema's queue
			}
			switch n.Channel {
			case "sheaf_jobs":
				q, prio := parseNotice(rest)
				if slices.Contains(r.cfg.queues, q) {
					r.noteArrival(q, prio)
					r.wakeFetch()
				}
			case "sheaf_cancel":
				if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
					r.cancelRunning(id, ErrCancelled)
				}
			}
		}
	})
}

// maintain renews the leases of running jobs and rescues expired ones.
func (r *Runner) maintain(ctx context.Context) {
	defer r.maint.Done()
	renew := time.NewTicker(r.cfg.lease / 3)
	defer renew.Stop()
	rescue := time.NewTicker(r.cfg.rescueEvery)
	defer rescue.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			r.renew(ctx)
		case <-rescue.C:
			r.rescue(ctx)
		}
	}
}

func (r *Runner) renew(ctx context.Context) {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.running))
	keys := make([]int64, 0, len(r.running))
	exs := make([]*execution, 0, len(r.running))
	for ex := range r.running {
		// Released ones too: Stop requeues them after they return.
		if !ex.finished {
			ids, keys, exs = append(ids, ex.row.ID), append(keys, keyOf(ex)), append(exs, ex)
		}
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, `UPDATE sheaf_jobs SET locked_until = now() + $1 * interval '1 millisecond'
		WHERE id = ANY($2) AND `+attemptKey+` = ANY($3) AND status = 'PROCESSING' AND locked_by = $4
		RETURNING `+attemptKey, r.cfg.lease.Milliseconds(), ids, keys, r.cfg.runnerID)
	if err != nil {
		r.log.Error("queue: lease renewal failed", "jobs", len(ids), "err", err)
		return
	}
	kept := map[int64]bool{} // attempt keys
	if err := collectIDs(rows, kept); err != nil {
		r.log.Error("queue: lease renewal failed", "jobs", len(ids), "err", err)
		return
	}
	for i, key := range keys {
		if !kept[key] {
			r.lost(ctx, exs[i])
		}
	}
}

// lost handles a running attempt whose row no longer names it: the job was
// cancelled (and the notification missed), or rescued (and perhaps claimed
// again, as a later attempt).
func (r *Runner) lost(ctx context.Context, ex *execution) {
	st, attempts, err := ex.now(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return // unsure; look again at the next renewal
	}
	r.mu.Lock()
	finished := ex.finished
	r.mu.Unlock()
	if finished {
		return // it ended meanwhile; its result is on its way
	}
	if st == StatusCancelled && attempts == ex.row.Attempts {
		ex.cancel(ErrCancelled)
	} else {
		ex.cancel(ErrLeaseLost)
	}
}

// rescueSQL takes jobs whose lease expired back from their runner: see rescue.
var rescueSQL = `
WITH expired AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'PROCESSING' AND locked_until < now()
	ORDER BY locked_until
	LIMIT 1000
	FOR UPDATE SKIP LOCKED
), rescued AS (
	UPDATE sheaf_jobs j SET
		status = CASE WHEN j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
		completed_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
		run_at = now(),
		last_error = 'lease expired: runner ' || coalesce(j.locked_by, '?') || ' stopped renewing it (it crashed, hung or lost the database)',
		locked_until = NULL, locked_by = NULL
	FROM expired WHERE j.id = expired.id
	RETURNING j.id, j.kind, j.queue, j.status, j.attempts, j.max_attempts, j.correlation_id, j.priority, j.run_at, j.last_error
), notified AS (` + notifyDueSQL("rescued") + `)
SELECT rescued.id, rescued.kind, rescued.queue, rescued.status, rescued.attempts, rescued.max_attempts, rescued.correlation_id,
	rescued.last_error
FROM rescued, notified`

// rescue returns jobs whose lease expired to the queue, or fails them if
// they have used their attempts (reporting EventFailed too, for dead-letter
// observers). Any runner rescues any runner's jobs; SKIP LOCKED keeps two
// rescuers from fighting.
func (r *Runner) rescue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, rescueSQL)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("queue: rescue failed", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var row JobRecord
		if err := rows.Scan(&row.ID, &row.Kind, &row.Queue, &row.Status, &row.Attempts, &row.MaxAttempts, &row.CorrelationID, &row.LastError); err != nil {
			r.log.Error("queue: rescue failed", "err", err)
			return
		}
		r.stats.rescued.Add(1)
		ex := &execution{row: row}
		r.observe(ex.event(EventRescued))
		r.jobLogger(&row).Warn("queue: rescued a job whose lease expired", "now", row.Status)
		if row.Status == StatusFailed {
			r.stats.failed.Add(1)
			ev := ex.event(EventFailed)
			ev.Err = fmt.Errorf("%w: %s", ErrLeaseLost, *row.LastError)
			r.observe(ev)
			r.jobLogger(&row).Error("queue: job failed for good", "err", ev.Err)
		}
	}
}
