package store

import (
	"context"
	"database/sql"
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
// job's creation (the listing's order) and its latest job's of that status.
type RunCount struct {
	RunID, Status string
	Period        sql.NullString
	N             int64
	First, Last   time.Time
}

// Runs lists runs newest first, by the creation of their first job and
// then by run ID, at most q.Limit of them, each as its counts by status
// (several RunCounts in a row per run). It groups the jobs that have a run
// ID, so its cost grows with them: it is for dashboards.
func Runs(ctx context.Context, s Store, db *gorm.DB, q RunsQuery) ([]RunCount, error) {
	at := pgTime
	if s.Dialect() == "sqlite" {
		at = sqliteTime
	}
	page := db.WithContext(ctx).Table(JobsTable).Select("run_id, min(created_at) AS first_at").
		Where("run_id IS NOT NULL").Group("run_id")
	if q.Period != "" {
		page = page.Where("period = ?", q.Period)
	}
	if !q.FirstFrom.IsZero() {
		page = page.Having("min(created_at) >= ?", at(q.FirstFrom))
	}
	if !q.FirstBefore.IsZero() {
		page = page.Having("min(created_at) < ?", at(q.FirstBefore))
	}
	if q.AfterRunID != "" {
		page = page.Having("(min(created_at) < ? OR (min(created_at) = ? AND run_id < ?))", at(q.AfterFirst), at(q.AfterFirst), q.AfterRunID)
	}
	rows, err := page.Order("first_at DESC, run_id DESC").Limit(q.Limit).Rows()
	if err != nil {
		return nil, err
	}
	var ids []string
	first := map[string]time.Time{}
	for rows.Next() {
		var id string
		var t sqlTime
		if err := rows.Scan(&id, &t); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
		first[id] = t.t
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return nil, err
	}
	counts, err := db.WithContext(ctx).Table(JobsTable).
		Select("run_id, status, count(*) AS n, max(period) AS period, max(created_at) AS last_at").
		Where("run_id IN ?", ids).Group("run_id, status").Rows()
	if err != nil {
		return nil, err
	}
	defer counts.Close()
	byRun := map[string][]RunCount{}
	for counts.Next() {
		var c RunCount
		var last sqlTime
		if err := counts.Scan(&c.RunID, &c.Status, &c.N, &c.Period, &last); err != nil {
			return nil, err
		}
		c.First, c.Last = first[c.RunID], last.t
		byRun[c.RunID] = append(byRun[c.RunID], c)
	}
	if err := counts.Err(); err != nil {
		return nil, err
	}
	var out []RunCount
	for _, id := range ids {
		out = append(out, byRun[id]...)
	}
	return out, nil
}
