package store

import (
	"context"
	"database/sql"
	"math"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Activity reads, for the dashboard's charts, the jobs that finished
// COMPLETED or FAILED from a time on: how many, and how long they waited and
// ran, through sheaf_jobs_finished (kind, completed_at) of finished jobs:
//
//   - completed jobs are read through it for every kind, the kinds found by
//     walking it (a loose index scan: one descent per kind);
//   - failed jobs are found through their attempt history, which the two
//     statements that fail a job (Fail and Rescue) write in the same
//     statement, finished at the job's completed_at: a scan of the attempts
//     table, which holds only attempts that did not complete, rather than a
//     visit to every FAILED job's row, which is spread over the whole table.
//     A job that failed before schema version 4 has no attempt recorded, and
//     is not counted.

// ActivityRow is one bucket of finished jobs: its start, how many jobs
// finished COMPLETED and FAILED in it, and the 50th and 95th percentiles
// (interpolated, as PostgreSQL's percentile_cont) of their waits (run_at to
// started_at) and run times (started_at to completed_at). Jobs without a
// started_at count, but have no wait or run time.
type ActivityRow struct {
	Start             time.Time
	Completed, Failed int64
	WaitP50, WaitP95  time.Duration
	RunP50, RunP95    time.Duration
	waits, runs       []time.Duration // of the jobs that started, for SQLite's finish
}

// activityPG is the series on PostgreSQL. $1 is the first bucket's start,
// $2 the bucket in microseconds, $3 the queue (empty for all), $4 the end. The kinds go to
// the index as one array, so that one bitmap heap scan visits each page of
// the window once rather than once per kind.
var activityPG = `
WITH done AS (
	SELECT j.status, j.completed_at, j.run_at, j.started_at FROM sheaf_jobs j
	WHERE j.status = 'COMPLETED' AND ` + pgKeeping.isFinished("j") + `
		AND j.completed_at >= $1 AND j.completed_at < $4 AND ($3 = '' OR j.queue = $3)
	UNION ALL
	SELECT j.status, j.completed_at, j.run_at, j.started_at FROM sheaf_jobs j
	WHERE j.id = ANY (ARRAY(SELECT job_id FROM sheaf_attempts WHERE finished_at >= $1 AND outcome IN ('failed', 'rescued')))
		AND j.status = 'FAILED' AND j.completed_at >= $1 AND j.completed_at < $4 AND ($3 = '' OR j.queue = $3)
)
SELECT b, completed, failed, wait[1], wait[2], run[1], run[2] FROM (
	SELECT date_bin($2 * interval '1 microsecond', completed_at, $1) AS b,
		count(*) FILTER (WHERE status = 'COMPLETED') AS completed, count(*) FILTER (WHERE status = 'FAILED') AS failed,
		percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY date_part('epoch', started_at - run_at)) AS wait,
		percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY date_part('epoch', completed_at - started_at)) AS run
	FROM done GROUP BY b
) s ORDER BY b`

// Activity reads the buckets of width bucket, from start to end, that have
// finished jobs of queue ("": every queue), in order. It runs in a read-only
// transaction that turns JIT compilation off (the planner cannot see how
// few kinds there are, overestimates the rows, and would compile for longer
// than the query runs) and gives the sorts room in memory.
func (s *postgres) Activity(ctx context.Context, start, end time.Time, bucket time.Duration, queue string) (out []ActivityRow, err error) {
	err = s.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT set_config('jit', 'off', true), set_config('work_mem', '64MB', true)").Error; err != nil {
			return err
		}
		out, err = collect(ctx, tx, func(rows *sql.Rows, r *ActivityRow) error {
			var w50, w95, r50, r95 sql.NullFloat64
			err := rows.Scan(&r.Start, &r.Completed, &r.Failed, &w50, &w95, &r50, &r95)
			r.WaitP50, r.WaitP95, r.RunP50, r.RunP95 = seconds(w50), seconds(w95), seconds(r50), seconds(r95)
			return err
		}, activityPG, start, bucket.Microseconds(), queue, end)
		return err
	}, &sql.TxOptions{ReadOnly: true})
	return out, err
}

// seconds converts PostgreSQL's seconds to a duration, to the microsecond
// it keeps times to; NULL (no job had a start) is 0.
func seconds(f sql.NullFloat64) time.Duration {
	if !f.Valid {
		return 0
	}
	return time.Duration(math.Round(f.Float64*1e6)) * time.Microsecond
}

// add counts a finished job in r; started is false for a job that never
// started.
func (r *ActivityRow) add(completed, started bool, wait, run time.Duration) {
	if completed {
		r.Completed++
	} else {
		r.Failed++
	}
	if started {
		r.waits = append(r.waits, wait)
		r.runs = append(r.runs, run)
	}
}

// finish computes r's percentiles from the durations add collected, to
// the microsecond, as PostgreSQL's series and the hour roll-ups keep them.
func (r *ActivityRow) finish() {
	slices.Sort(r.waits)
	slices.Sort(r.runs)
	r.WaitP50, r.WaitP95 = percentile(r.waits, 0.5).Round(time.Microsecond), percentile(r.waits, 0.95).Round(time.Microsecond)
	r.RunP50, r.RunP95 = percentile(r.runs, 0.5).Round(time.Microsecond), percentile(r.runs, 0.95).Round(time.Microsecond)
	r.waits, r.runs = nil, nil
}

// percentile is PostgreSQL's percentile_cont over sorted: the value at
// position p·(n-1), interpolated between its neighbours; 0 if there is none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	pos := p * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	return sorted[lo] + time.Duration(math.Round((pos-float64(lo))*float64(sorted[lo+1]-sorted[lo])))
}
