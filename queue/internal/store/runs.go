package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// RunsQuery selects runs, the jobs that share a run ID, for Runs.
type RunsQuery struct {
	// Period keeps the runs with jobs of that period.
	Period string
	// FirstFrom (inclusive) and FirstBefore (exclusive) bound the creation
	// of each run's first job.
	FirstFrom, FirstBefore time.Time
	// After continues a listing after the run with this first job's
	// creation and ID; a zero After starts at the newest.
	AfterFirst time.Time
	AfterRunID string
	Limit      int
}

// RunCount is how many jobs of a run have a status, with the run's first
// job's creation (the listing's order), its latest job's of that status,
// and when the latest of them finished (zero if none has).
type RunCount struct {
	RunID, Status string
	Period        sql.NullString
	N             int64
	First, Last   time.Time
	Finished      time.Time
}

// RunsTable holds one row per run: see schema version 12.
const RunsTable = "sheaf_runs"

// Runs lists runs newest first, by the creation of their first job and
// then by run ID, at most q.Limit of them, each as its counts by status
// (several RunCounts in a row per run). It reads a page of sheaf_runs; a
// finished run's counts come from its row, and only the runs still going
// (or changed since their counts were kept) are counted job by job, so its
// cost follows the page and the runs still going, not the table.
func Runs(ctx context.Context, s Store, db *gorm.DB, q RunsQuery) ([]RunCount, error) {
	at := timeArg(s)
	page := db.WithContext(ctx).Table(RunsTable).Select("run_id, period, first_created, last_created, max_id, counts, last_finished")
	if q.Period != "" {
		page = page.Where("period = ?", q.Period)
	}
	if !q.FirstFrom.IsZero() {
		page = page.Where("first_created >= ?", at(q.FirstFrom))
	}
	if !q.FirstBefore.IsZero() {
		page = page.Where("first_created < ?", at(q.FirstBefore))
	}
	if q.AfterRunID != "" {
		page = page.Where("(first_created < ? OR (first_created = ? AND run_id < ?))", at(q.AfterFirst), at(q.AfterFirst), q.AfterRunID)
	}
	rows, err := page.Order("first_created DESC, run_id DESC").Limit(q.Limit).Rows()
	if err != nil {
		return nil, err
	}
	var runs []runRow
	for rows.Next() {
		var r runRow
		if err := rows.Scan(&r.RunID, &r.Period, &r.FirstCreated, &r.LastCreated, &r.MaxID, &r.Counts, &r.LastFinished); err != nil {
			rows.Close()
			return nil, err
		}
		runs = append(runs, r)
	}
	if err := errors.Join(rows.Close(), rows.Err()); err != nil {
		return nil, err
	}
	live, err := liveRuns(ctx, db, runs)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	byRun, err := countRuns(ctx, db, live)
	if err != nil {
		return nil, err
	}
	var out []RunCount
	for _, r := range runs {
		counted, ok := byRun[r.RunID]
		if !ok {
			if counted, err = r.kept(); err != nil {
				return nil, err
			}
		}
		for i := range counted {
			counted[i].First = r.FirstCreated.t
		}
		out = append(out, counted...)
	}
	return out, nil
}

// runRow is a row of sheaf_runs.
type runRow struct {
	RunID        string
	Period       sql.NullString
	FirstCreated sqlTime
	LastCreated  sqlTime
	MaxID        sql.NullInt64
	Counts       sql.NullString
	LastFinished sqlTime
}

// kept returns the counts kept in r, by status in order; the run's latest
// finish goes with each (it is kept for the run, not by status).
func (r runRow) kept() ([]RunCount, error) {
	var n map[string]int64
	if err := json.Unmarshal([]byte(r.Counts.String), &n); err != nil {
		return nil, fmt.Errorf("run %q: kept counts: %w", r.RunID, err)
	}
	out := make([]RunCount, 0, len(n))
	for _, status := range slices.Sorted(maps.Keys(n)) {
		out = append(out, RunCount{RunID: r.RunID, Status: status, Period: r.Period, N: n[status], Last: r.LastCreated.t, Finished: r.LastFinished.t})
	}
	return out, nil
}

// liveRuns returns the IDs of the runs that must be counted job by job:
// those without kept counts, and those with a job newer than their counts
// (inserted while a roll-up counted them).
func liveRuns(ctx context.Context, db *gorm.DB, runs []runRow) ([]string, error) {
	var live []string
	var probe []string
	var args []any
	text, bigint := "TEXT", "BIGINT"
	if db.Dialector.Name() == "mysql" {
		text, bigint = "CHAR", "SIGNED"
	}
	for _, r := range runs {
		if !r.Counts.Valid || !r.MaxID.Valid {
			live = append(live, r.RunID)
			continue
		}
		// Each probe reads the run's newest entry of the run index.
		probe = append(probe, "SELECT CAST(? AS "+text+") AS run_id, CAST(? AS "+bigint+") AS kept, (SELECT max(id) FROM "+JobsTable+" WHERE run_id = ?) AS newest")
		args = append(args, r.RunID, r.MaxID.Int64, r.RunID)
	}
	if len(probe) == 0 {
		return live, nil
	}
	var newer []string
	err := db.WithContext(ctx).Raw("SELECT run_id FROM ("+strings.Join(probe, " UNION ALL ")+") p WHERE newest > kept", args...).
		Scan(&newer).Error
	return append(live, newer...), err
}

// countRuns counts the jobs of runs by status.
func countRuns(ctx context.Context, db *gorm.DB, runs []string) (map[string][]RunCount, error) {
	byRun := map[string][]RunCount{}
	if len(runs) == 0 {
		return byRun, nil
	}
	counts, err := db.WithContext(ctx).Table(JobsTable).
		Select("run_id, status, count(*) AS n, max(period) AS period, max(created_at) AS last_at, max(completed_at) AS finished_at").
		Where("run_id IN ?", runs).Group("run_id, status").Order("run_id, status").Rows()
	if err != nil {
		return nil, err
	}
	defer counts.Close()
	for counts.Next() {
		var c RunCount
		var last, finished sqlTime
		if err := counts.Scan(&c.RunID, &c.Status, &c.N, &c.Period, &last, &finished); err != nil {
			return nil, err
		}
		c.Last, c.Finished = last.t, finished.t
		byRun[c.RunID] = append(byRun[c.RunID], c)
	}
	return byRun, counts.Err()
}

// KeepRunCounts keeps the counts of finished runs in their sheaf_runs rows,
// looking at every run without counts, the oldest first, page by page of
// page runs, and returns the runs whose counts it kept. A run is finished when none of
// its jobs is queued or running. Each run is counted in a transaction of
// its own, under its row's lock, which a retry's clearing of its counts
// waits for.
func KeepRunCounts(ctx context.Context, s Store, db *gorm.DB, page int) ([]string, error) {
	var kept []string
	var after struct {
		first any
		run   string
	}
	for {
		q := db.WithContext(ctx).Table(RunsTable).Select("run_id, first_created").Where("counts IS NULL")
		if after.run != "" {
			q = q.Where("(first_created > ? OR (first_created = ? AND run_id > ?))", after.first, after.first, after.run)
		}
		rows, err := q.Order("first_created, run_id").Limit(page).Rows()
		if err != nil {
			return kept, err
		}
		var open []string
		for rows.Next() {
			var first sqlTime
			if err := rows.Scan(&after.run, &first); err != nil {
				rows.Close()
				return kept, err
			}
			after.first = timeArg(s)(first.t)
			open = append(open, after.run)
		}
		if err := errors.Join(rows.Close(), rows.Err()); err != nil {
			return kept, err
		}
		n, err := keepCounts(ctx, s, db, open)
		kept = append(kept, n...)
		if err != nil || len(open) < page {
			return kept, err
		}
	}
}

// keepCounts keeps the counts of those of runs that have finished: by
// status, and by kind and status with each one's first start (kinds, for
// the run's review), from one grouping of the run's jobs.
func keepCounts(ctx context.Context, s Store, db *gorm.DB, open []string) ([]string, error) {
	const groups = `WITH g AS (
		SELECT kind, status, count(*) AS n, min(started_at) AS first, max(created_at) AS last, max(id) AS newest,
			max(completed_at) AS finished
		FROM ` + JobsTable + ` WHERE run_id = @run GROUP BY kind, status)`
	byStatus, byKind := "jsonb_object_agg(status, n)", "jsonb_agg(jsonb_build_array(kind, status, n, first))"
	switch s.Dialect() {
	case "sqlite":
		byStatus, byKind = "json_group_object(status, n)", "json_group_array(json_array(kind, status, n, first))"
	case "mysql":
		byStatus, byKind = "JSON_OBJECTAGG(status, n)", "JSON_ARRAYAGG(JSON_ARRAY(kind, status, n, first))"
	}
	counts := `SELECT (SELECT coalesce(` + byStatus + `, '{}') FROM (SELECT status, sum(n) AS n FROM g GROUP BY status) t) AS counts,
		coalesce(` + byKind + `, '[]') AS kinds, max(last) AS last, coalesce(max(newest), 0) AS newest, max(finished) AS finished FROM g`
	finished := `counts IS NULL
	AND NOT EXISTS (SELECT 1 FROM ` + JobsTable + ` WHERE run_id = @run AND status IN ('QUEUED', 'PROCESSING'))`
	keep := `UPDATE ` + RunsTable + ` SET (counts, kinds, last_created, max_id, last_finished) = (` + groups + `
	` + counts + `)
WHERE run_id = @run AND ` + finished
	if s.Dialect() == "mysql" {
		// MariaDB assigns no row of values: the counts join as a table.
		keep = `UPDATE ` + RunsTable + ` r JOIN (` + groups + `
	` + counts + `) a
SET r.counts = a.counts, r.kinds = a.kinds, r.last_created = a.last, r.max_id = a.newest, r.last_finished = a.finished
WHERE r.run_id = @run AND r.` + finished
	}
	var kept []string
	for _, run := range open {
		var n int64
		err := s.Tx(ctx, db, func(tx *gorm.DB) error {
			if s.Dialect() != "sqlite" { // SQLite's transaction holds the file's write lock
				var locked []string
				if err := tx.Raw("SELECT run_id FROM "+RunsTable+" WHERE run_id = ? FOR UPDATE", run).Scan(&locked).Error; err != nil {
					return err
				}
			}
			res := tx.Exec(keep, sql.Named("run", run))
			n = res.RowsAffected
			return res.Error
		})
		if err != nil {
			return kept, err
		}
		if n > 0 {
			kept = append(kept, run)
		}
	}
	return kept, nil
}
