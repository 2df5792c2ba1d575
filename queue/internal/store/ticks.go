package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// SchedulesTable holds each schedule's last fired tick.
const SchedulesTable = "sheaf_schedules"

// TicksTable is the tick ledger: one row per expected tick of a schedule.
const TicksTable = "sheaf_ticks"

// TickKeep is how long the ledger keeps a schedule's ticks: a year, and a
// month to compare it with. RecordTicks deletes older ones.
const TickKeep = 400 * 24 * time.Hour

// The outcomes of a tick in the ledger.
const (
	TickFired  = "fired"  // fired within the schedule's grace
	TickLate   = "late"   // fired after its time by more than the grace
	TickMissed = "missed" // skipped by the schedule's missed-tick policy
)

// TickRow is a row of the ledger.
type TickRow struct {
	Schedule   string
	At         time.Time
	Outcome    string
	RecordedAt time.Time
	RunID      string
	Jobs       int
}

// doNothing is the clause of an INSERT that leaves a row whose key (the
// columns cols) is taken as it is, in s's SQL.
func doNothing(s Store, cols string) string {
	if s.Dialect() == "mysql" {
		first, _, _ := strings.Cut(cols, ",")
		return "ON DUPLICATE KEY UPDATE " + first + " = " + first
	}
	return "ON CONFLICT (" + cols + ") DO NOTHING"
}

// timeArg returns how s's statements take a time.
func timeArg(s Store) func(time.Time) any {
	switch s.Dialect() {
	case "sqlite":
		return sqliteTime
	case "mysql":
		return mysqlTime
	}
	return pgTime
}

// tickBatch is how many ledger rows one INSERT writes: six parameters each,
// well within both databases' limits.
const tickBatch = 500

// RecordTicks writes rows to the ledger in tx, the transaction that fires
// or skips them, leaving a tick already recorded as it is, and deletes the
// ledger's rows of those schedules older than TickKeep before the latest
// row's tick. The deletion walks the ledger's primary key, so it costs the
// rows it deletes.
func RecordTicks(s Store, tx *gorm.DB, rows []TickRow) error {
	at := timeArg(s)
	latest := map[string]time.Time{}
	for len(rows) > 0 {
		n := min(len(rows), tickBatch)
		args := make([]any, 0, 6*n)
		for _, r := range rows[:n] {
			args = append(args, r.Schedule, at(r.At), r.Outcome, at(r.RecordedAt), r.RunID, r.Jobs)
			if r.At.After(latest[r.Schedule]) {
				latest[r.Schedule] = r.At
			}
		}
		q := "INSERT INTO " + TicksTable + " (schedule, at, outcome, recorded_at, run_id, jobs) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?), ", n), ", ") + " " + doNothing(s, "schedule, at")
		if err := tx.Exec(q, args...).Error; err != nil {
			return fmt.Errorf("record ticks: %w", err)
		}
		rows = rows[n:]
	}
	for name, last := range latest {
		if err := tx.Exec("DELETE FROM "+TicksTable+" WHERE schedule = ? AND at < ?", name, at(last.Add(-TickKeep))).Error; err != nil {
			return fmt.Errorf("prune ticks: %w", err)
		}
	}
	return nil
}

// StartSchedule gives schedule name a row, unless it has one, that counts
// ticks from last on and says it was started at started.
func StartSchedule(s Store, tx *gorm.DB, name string, last, started time.Time) error {
	at := timeArg(s)
	return tx.Exec("INSERT INTO "+SchedulesTable+" (name, last_tick, started_at) VALUES (?, ?, ?) "+doNothing(s, "name"),
		name, at(last), at(started)).Error
}

// ScheduleRow is a schedule's row: where a runner counts its ticks from,
// and when one first started it (zero for a row written before the
// ledger, or by a tick fired before any runner started the schedule).
type ScheduleRow struct {
	LastTick, Started time.Time
}

// ScheduleRows returns every schedule's row, by name: every schedule that
// a runner has started, whatever the registry now holds.
func ScheduleRows(ctx context.Context, db *gorm.DB) (map[string]ScheduleRow, error) {
	rows, err := db.WithContext(ctx).Raw("SELECT name, last_tick, started_at FROM " + SchedulesTable).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]ScheduleRow{}
	for rows.Next() {
		var name string
		var last, started sqlTime
		if err := rows.Scan(&name, &last, &started); err != nil {
			return nil, err
		}
		out[name] = ScheduleRow{LastTick: last.t, Started: started.t}
	}
	return out, rows.Err()
}

// TicksQuery selects ledger rows for Ticks. Zero fields select everything.
type TicksQuery struct {
	Schedules []string
	// From (inclusive) and To (exclusive) bound the ticks' times.
	From, To time.Time
	Outcomes []string
	// Before continues a listing after the row of this schedule and time,
	// the last of the previous page; a zero time starts at the newest.
	Before         time.Time
	BeforeSchedule string
	Limit          int // 0: no limit
}

// Ticks reads the ledger rows q selects, newest tick first (then by
// schedule, descending), through the index on the ticks' time.
func Ticks(ctx context.Context, s Store, db *gorm.DB, q TicksQuery) ([]TickRow, error) {
	at := timeArg(s)
	sel := db.WithContext(ctx).Table(TicksTable).Select(tickColumns)
	if len(q.Schedules) > 0 {
		sel = sel.Where("schedule IN ?", q.Schedules)
	}
	if !q.From.IsZero() {
		sel = sel.Where("at >= ?", at(q.From))
	}
	if !q.To.IsZero() {
		sel = sel.Where("at < ?", at(q.To))
	}
	if len(q.Outcomes) > 0 {
		sel = sel.Where("outcome IN ?", q.Outcomes)
	}
	if !q.Before.IsZero() {
		sel = sel.Where("(at < ? OR (at = ? AND schedule < ?))", at(q.Before), at(q.Before), q.BeforeSchedule)
	}
	if q.Limit > 0 {
		sel = sel.Limit(q.Limit)
	}
	rows, err := sel.Order("at DESC, schedule DESC").Rows()
	if err != nil {
		return nil, err
	}
	return scanTicks(rows)
}

// tickColumns are the ledger's columns as scanTicks reads them.
const tickColumns = "schedule, at, outcome, recorded_at, run_id, jobs"

// scanTicks reads and closes rows of tickColumns.
func scanTicks(rows *sql.Rows) ([]TickRow, error) {
	defer rows.Close()
	var out []TickRow
	for rows.Next() {
		var r TickRow
		var tick, recorded sqlTime
		if err := rows.Scan(&r.Schedule, &tick, &r.Outcome, &recorded, &r.RunID, &r.Jobs); err != nil {
			return nil, err
		}
		r.At, r.RecordedAt = tick.t, recorded.t
		out = append(out, r)
	}
	return out, rows.Err()
}

// TickSummary is where a schedule stands in the ledger: its newest tick
// that fired (on time or late), and the ticks missed since.
type TickSummary struct {
	Last         *TickRow // nil: none fired
	Missed       int
	LatestMissed time.Time
}

// SummarizeTicks reads schedule's TickSummary in one statement, through
// the ledger's primary key.
func SummarizeTicks(ctx context.Context, s Store, db *gorm.DB, schedule string) (TickSummary, error) {
	var at, recorded, latest sqlTime
	var outcome, runID sql.NullString
	var jobs sql.NullInt64
	var sum TickSummary
	err := db.WithContext(ctx).Raw(`SELECT l.at, l.outcome, l.recorded_at, l.run_id, l.jobs, count(m.at), max(m.at)
		FROM (SELECT 1 AS one) o
		LEFT JOIN (SELECT at, outcome, recorded_at, run_id, jobs FROM `+TicksTable+`
			WHERE schedule = ? AND outcome IN (?, ?) ORDER BY at DESC LIMIT 1) l ON 1 = 1
		LEFT JOIN `+TicksTable+` m ON m.schedule = ? AND m.outcome = ? AND (l.at IS NULL OR m.at > l.at)
		GROUP BY l.at, l.outcome, l.recorded_at, l.run_id, l.jobs`,
		schedule, TickFired, TickLate, schedule, TickMissed).Row().Scan(&at, &outcome, &recorded, &runID, &jobs, &sum.Missed, &latest)
	if err != nil {
		return TickSummary{}, err
	}
	if at.valid {
		sum.Last = &TickRow{Schedule: schedule, At: at.t, Outcome: outcome.String, RecordedAt: recorded.t, RunID: runID.String, Jobs: int(jobs.Int64)}
	}
	sum.LatestMissed = latest.t
	return sum, nil
}
