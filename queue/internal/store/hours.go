package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Hour roll-ups (schema version 15): the activity series of each finished
// hour, kept after the pruner deletes the hour's jobs.

// Hourly keeps the hour roll-ups.
type Hourly interface {
	// RollHour replaces the roll-ups of the hour that starts at (a UTC
	// hour) with those of the jobs that finished in it, and records the
	// next hour as the first not final (and, before the first roll-up,
	// at as the first kept), in one transaction: run again, it writes the
	// same rows.
	RollHour(ctx context.Context, at time.Time) error
	// HoursFinal returns the hours whose roll-ups are kept and final,
	// [from, before); ok is false before the first roll-up.
	HoursFinal(ctx context.Context) (from, before time.Time, ok bool, err error)
	// Hours reads the roll-ups of every kind of queue ("": of every queue)
	// for the hours in [from, to) that have completed or failed jobs, in
	// order, as the activity series reads them from the jobs.
	Hours(ctx context.Context, from, to time.Time, queue string) ([]ActivityRow, error)
	// DropHours deletes the roll-ups of the hours before before, and moves
	// the first kept hour up to it.
	DropHours(ctx context.Context, before time.Time) (int64, error)
}

// hourJobs selects, as the activity series does, the jobs that finished in
// [from, to): completed, failed with a failed or rescued attempt, and
// cancelled; through the index of finish times.
// The bound times are from, to and from again.
func (k keeping) hourJobs() string {
	return ` FROM sheaf_jobs j WHERE ` + k.isFinished("j") + ` AND j.completed_at >= %[1]s AND j.completed_at < %[2]s
	AND (j.status <> 'FAILED' OR EXISTS (SELECT 1 FROM sheaf_attempts a
		WHERE a.job_id = j.id AND a.finished_at >= %[1]s AND a.outcome IN ('failed', 'rescued')))`
}

// rollHourPG rolls an hour up in one statement: grouping sets give the
// kind × queue rows, each queue's and the total, with percentile_cont as
// the activity series computes them.
var rollHourPG = `INSERT INTO sheaf_hours (hour, kind, queue, completed, failed, cancelled, wait_p50, wait_p95, run_p50, run_p95)
SELECT CAST(? AS timestamptz), coalesce(kind, ''), coalesce(queue, ''), completed, failed, cancelled,
	coalesce(wait[1], 0), coalesce(wait[2], 0), coalesce(run[1], 0), coalesce(run[2], 0) FROM (
	SELECT j.kind, j.queue, count(*) FILTER (WHERE j.status = 'COMPLETED') AS completed,
		count(*) FILTER (WHERE j.status = 'FAILED') AS failed, count(*) FILTER (WHERE j.status = 'CANCELLED') AS cancelled,
		percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY date_part('epoch', j.started_at - j.run_at))
			FILTER (WHERE j.status <> 'CANCELLED') AS wait,
		percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY date_part('epoch', j.completed_at - j.started_at))
			FILTER (WHERE j.status <> 'CANCELLED') AS run` +
	fmt.Sprintf(pgKeeping.hourJobs(), "CAST(? AS timestamptz)", "CAST(? AS timestamptz)") + `
	GROUP BY GROUPING SETS ((j.kind, j.queue), (j.queue), ())
) s WHERE completed + failed + cancelled > 0`

// hourFinal records the hours kept and final, keeping the first kept.
func (k keeping) hourFinal(tx *gorm.DB, from, to time.Time) error {
	return tx.Exec(`INSERT INTO sheaf_hours_final (id, kept_from, final_before) VALUES (1, `+k.ts+`, `+k.ts+`) `+k.upsert,
		k.at(from), k.at(to)).Error
}

func (s *postgres) RollHour(ctx context.Context, at time.Time) error {
	at = at.UTC()
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM sheaf_hours WHERE hour = ?", at).Error; err != nil {
			return err
		}
		if err := tx.Exec(rollHourPG, at, at, at.Add(time.Hour), at).Error; err != nil {
			return err
		}
		return pgKeeping.hourFinal(tx, at, at.Add(time.Hour))
	})
}

func (s *sqlite) RollHour(ctx context.Context, at time.Time) error {
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		return sqliteKeeping.rollHour(tx, at, "j.run_at || '', j.started_at || '', j.completed_at || ''",
			func(rows *sql.Rows, j *hourJob) error {
				var runAt, started sql.NullString
				var done string
				if err := rows.Scan(&j.kind, &j.queue, &j.status, &runAt, &started, &done); err != nil || !started.Valid {
					return err
				}
				d, err1 := parseStamp([]byte(done))
				due, err2 := parseStamp([]byte(runAt.String))
				st, err3 := parseStamp([]byte(started.String))
				j.started, j.wait, j.run = true, st.Sub(due), d.Sub(st)
				return firstErr(err1, err2, err3)
			})
	})
}

func (s *mysql) RollHour(ctx context.Context, at time.Time) error {
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		return mysqlKeeping.rollHour(tx, at, "j.run_at, j.started_at, j.completed_at", func(rows *sql.Rows, j *hourJob) error {
			var runAt, done time.Time
			var started sql.NullTime
			if err := rows.Scan(&j.kind, &j.queue, &j.status, &runAt, &started, &done); err != nil || !started.Valid {
				return err
			}
			j.started, j.wait, j.run = true, started.Time.Sub(runAt), done.Sub(started.Time)
			return nil
		})
	})
}

// hourJob is a finished job as an hour's roll-up in the process reads it.
type hourJob struct {
	kind, queue, status string
	started             bool
	wait, run           time.Duration
}

// rollHour rolls an hour up in the process, for the databases without
// percentile_cont: times is what it selects of each job's times, and scan
// reads a row of kind, queue, status and those.
func (k keeping) rollHour(tx *gorm.DB, at time.Time, times string, scan func(*sql.Rows, *hourJob) error) error {
	at = at.UTC()
	rows, err := tx.Raw(`SELECT j.kind, j.queue, j.status, `+times+fmt.Sprintf(k.hourJobs(), k.ts, k.ts),
		k.at(at), k.at(at.Add(time.Hour)), k.at(at)).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	type key struct{ kind, queue string }
	type acc struct {
		row       ActivityRow
		cancelled int64
	}
	accs := map[key]*acc{}
	for rows.Next() {
		var j hourJob
		if err := scan(rows, &j); err != nil {
			return err
		}
		for _, kq := range []key{{j.kind, j.queue}, {"", j.queue}, {"", ""}} {
			a := accs[kq]
			if a == nil {
				a = &acc{}
				accs[kq] = a
			}
			if j.status == "CANCELLED" {
				a.cancelled++
				continue
			}
			a.row.add(j.status == "COMPLETED", j.started, j.wait, j.run)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	if err := tx.Exec("DELETE FROM sheaf_hours WHERE hour = "+k.ts, k.at(at)).Error; err != nil {
		return err
	}
	for kq, a := range accs {
		r := &a.row
		r.finish()
		if err := tx.Exec(`INSERT INTO sheaf_hours (hour, kind, queue, completed, failed, cancelled, wait_p50, wait_p95, run_p50, run_p95)
			VALUES (`+k.ts+`, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.at(at), kq.kind, kq.queue, r.Completed, r.Failed, a.cancelled,
			r.WaitP50.Seconds(), r.WaitP95.Seconds(), r.RunP50.Seconds(), r.RunP95.Seconds()).Error; err != nil {
			return err
		}
	}
	return k.hourFinal(tx, at, at.Add(time.Hour))
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func hoursFinal(ctx context.Context, db *gorm.DB) (from, before time.Time, ok bool, err error) {
	var f, b sqlTime
	err = db.WithContext(ctx).Raw("SELECT kept_from, final_before FROM sheaf_hours_final").Row().Scan(&f, &b)
	if err == sql.ErrNoRows {
		return time.Time{}, time.Time{}, false, nil
	}
	return f.t, b.t, err == nil, err
}

func (s *postgres) HoursFinal(ctx context.Context) (from, before time.Time, ok bool, err error) {
	return hoursFinal(ctx, s.gdb)
}

func (s *sqlite) HoursFinal(ctx context.Context) (from, before time.Time, ok bool, err error) {
	return hoursFinal(ctx, s.gdb)
}

func (s *mysql) HoursFinal(ctx context.Context) (from, before time.Time, ok bool, err error) {
	return hoursFinal(ctx, s.gdb)
}

func (k keeping) hours(ctx context.Context, db *gorm.DB, from, to time.Time, queue string) ([]ActivityRow, error) {
	rows, err := db.WithContext(ctx).Raw(`SELECT hour, completed, failed, wait_p50, wait_p95, run_p50, run_p95 FROM sheaf_hours
		WHERE kind = '' AND queue = ? AND hour >= `+k.ts+` AND hour < `+k.ts+` AND completed + failed > 0 ORDER BY hour`,
		queue, k.at(from), k.at(to)).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ActivityRow
	for rows.Next() {
		var (
			r                  ActivityRow
			at                 sqlTime
			w50, w95, r50, r95 sql.NullFloat64
		)
		if err := rows.Scan(&at, &r.Completed, &r.Failed, &w50, &w95, &r50, &r95); err != nil {
			return nil, err
		}
		r.Start = at.t
		r.WaitP50, r.WaitP95, r.RunP50, r.RunP95 = seconds(w50), seconds(w95), seconds(r50), seconds(r95)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *postgres) Hours(ctx context.Context, from, to time.Time, queue string) ([]ActivityRow, error) {
	return pgKeeping.hours(ctx, s.gdb, from, to, queue)
}

func (s *sqlite) Hours(ctx context.Context, from, to time.Time, queue string) ([]ActivityRow, error) {
	return sqliteKeeping.hours(ctx, s.gdb, from, to, queue)
}

func (s *mysql) Hours(ctx context.Context, from, to time.Time, queue string) ([]ActivityRow, error) {
	return mysqlKeeping.hours(ctx, s.gdb, from, to, queue)
}

func (k keeping) dropHours(ctx context.Context, db *gorm.DB, tx func(context.Context, *gorm.DB, func(*gorm.DB) error) error,
	before time.Time) (n int64, err error) {
	err = tx(ctx, db, func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM sheaf_hours WHERE hour < "+k.ts, k.at(before))
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Exec("UPDATE sheaf_hours_final SET kept_from = "+k.ts+" WHERE kept_from < "+k.ts, k.at(before), k.at(before)).Error
	})
	return n, err
}

func (s *postgres) DropHours(ctx context.Context, before time.Time) (int64, error) {
	return pgKeeping.dropHours(ctx, s.gdb, s.Tx, before)
}

func (s *sqlite) DropHours(ctx context.Context, before time.Time) (int64, error) {
	return sqliteKeeping.dropHours(ctx, s.gdb, s.Tx, before)
}

func (s *mysql) DropHours(ctx context.Context, before time.Time) (int64, error) {
	return mysqlKeeping.dropHours(ctx, s.gdb, s.Tx, before)
}
