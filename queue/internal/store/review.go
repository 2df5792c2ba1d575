package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// runSeconds is a job's run time in seconds, in dialect's SQL.
func runSeconds(dialect string) string {
	switch dialect {
	case "postgres":
		return "extract(epoch FROM completed_at - started_at)"
	case "mysql":
		return "TIMESTAMPDIFF(MICROSECOND, started_at, completed_at) / 1e6"
	}
	return "(julianday(completed_at) - julianday(started_at)) * 86400.0"
}

// runAtLeast is Filter.RunAtLeast's condition and its arguments, kinds in
// order so that the statement is the same for the same filter. PostgreSQL
// compares intervals: the run time in seconds is a numeric there, and
// computing it for every job of a night of eleven thousand took two
// thirds of the review's slow-job count.
func runAtLeast(dialect string, min map[string]time.Duration) (string, []any) {
	kinds := slices.Sorted(maps.Keys(min))
	terms := make([]string, len(kinds))
	args := make([]any, 0, 2*len(kinds))
	for i, k := range kinds {
		if dialect == "postgres" {
			terms[i] = "(kind = ? AND completed_at - started_at >= CAST(? AS interval))"
			args = append(args, k, fmt.Sprintf("%d microseconds", min[k].Microseconds()))
			continue
		}
		terms[i] = "(kind = ? AND " + runSeconds(dialect) + " >= ?)"
		args = append(args, k, min[k].Seconds())
	}
	return "status = 'COMPLETED' AND started_at IS NOT NULL AND (" + strings.Join(terms, " OR ") + ")", args
}

// KindStatus counts the jobs of one kind and status a filter selects, with
// the first time one of them started (zero if none has).
type KindStatus struct {
	Kind, Status string
	N            int64
	FirstStart   time.Time
}

// CountKindStatus counts the jobs f selects by kind and status, in one
// aggregate statement: a review's totals and each kind's first start. When
// f selects one run and nothing else, and the run has finished, the counts
// the runs roll-up kept with it are read instead (see keepCounts), rather
// than every job of the night: they are the same, and outlive the jobs
// that retention prunes.
func CountKindStatus(ctx context.Context, s Store, db *gorm.DB, f Filter) ([]KindStatus, error) {
	if f.RunID != "" && reflect.DeepEqual(f, Filter{RunID: f.RunID}) {
		if kept, ok, err := keptKindStatus(ctx, db, f.RunID); err != nil || ok {
			return kept, err
		}
	}
	rows, err := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).
		Select("kind, status, count(*), min(started_at)").Group("kind, status").Order("kind, status").Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []KindStatus
	for rows.Next() {
		var r KindStatus
		var first sqlTime
		if err := rows.Scan(&r.Kind, &r.Status, &r.N, &first); err != nil {
			return nil, err
		}
		r.FirstStart = first.t
		out = append(out, r)
	}
	return out, rows.Err()
}

// keptKindStatus reads the counts by kind and status kept with run, in
// order; ok is false when none are (the run has not finished, or has
// changed since, which clears its counts, or its counts were kept before
// schema version 23).
func keptKindStatus(ctx context.Context, db *gorm.DB, run string) (out []KindStatus, ok bool, err error) {
	var kept []sql.NullString
	err = db.WithContext(ctx).Table(RunsTable).Where("run_id = ? AND counts IS NOT NULL", run).Pluck("kinds", &kept).Error
	if err != nil || len(kept) == 0 || !kept[0].Valid {
		return nil, false, err
	}
	out, err = parseKinds(run, kept[0].String)
	return out, err == nil, err
}

// parseKinds reads the counts by kind and status that sheaf_runs.kinds
// keeps for run, in order.
func parseKinds(run, kinds string) ([]KindStatus, error) {
	var groups [][4]json.RawMessage // kind, status, count, first start (null if none started)
	if err := json.Unmarshal([]byte(kinds), &groups); err != nil {
		return nil, fmt.Errorf("run %q: kept counts by kind: %w", run, err)
	}
	out := make([]KindStatus, len(groups))
	for i, g := range groups {
		var first *string
		r := &out[i]
		if err := errors.Join(json.Unmarshal(g[0], &r.Kind), json.Unmarshal(g[1], &r.Status), json.Unmarshal(g[2], &r.N),
			json.Unmarshal(g[3], &first)); err != nil {
			return nil, fmt.Errorf("run %q: kept counts by kind: %w", run, err)
		}
		if first != nil {
			var t sqlTime
			if err := t.Scan(*first); err != nil {
				return nil, fmt.Errorf("run %q: kept counts by kind: %w", run, err)
			}
			r.FirstStart = t.t
		}
	}
	slices.SortFunc(out, func(a, b KindStatus) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Status, b.Status))
	})
	return out, nil
}

// ErrorSample is the FAILED jobs of one kind that f selects with one last
// error: how many, and the IDs of the first few.
type ErrorSample struct {
	Error string // "" for none
	Kind  string
	N     int64
	IDs   []int64
}

// ErrorSamples groups the FAILED jobs f selects by last error and kind,
// the largest group first, with the IDs of each group's first perGroup
// jobs, reading at most maxRows rows: the database counts and picks, so
// the cost of a run's failure groups is one scan of its failed jobs
// however many there are. Groups past maxRows are left out; the caller
// counts them from the FAILED total.
func ErrorSamples(ctx context.Context, s Store, db *gorm.DB, f Filter, perGroup, maxRows int) ([]ErrorSample, error) {
	f.Statuses = []string{"FAILED"}
	inner := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).
		Select(`coalesce(last_error, '') AS err, kind, id,
			row_number() OVER (PARTITION BY last_error, kind ORDER BY id) AS rn,
			count(*) OVER (PARTITION BY last_error, kind) AS n`)
	rows, err := db.WithContext(ctx).Table("(?) AS s", inner).Select("err, kind, n, id").Where("rn <= ?", perGroup).
		Order("n DESC, err, kind, id").Limit(maxRows).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ErrorSample
	for rows.Next() {
		var r ErrorSample
		var id int64
		if err := rows.Scan(&r.Error, &r.Kind, &r.N, &id); err != nil {
			return nil, err
		}
		if l := len(out) - 1; l >= 0 && out[l].Error == r.Error && out[l].Kind == r.Kind {
			out[l].IDs = append(out[l].IDs, id)
			continue
		}
		r.IDs = []int64{id}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CountedPage returns the IDs of the first limit jobs f selects, in order,
// and how many it selects in all, in one statement: one read of the jobs
// where a page and a count read them twice. The review lists its slow
// jobs with it, whose first hundred may be spread over most of a night.
func CountedPage(ctx context.Context, s Store, db *gorm.DB, f Filter, limit int) (ids []int64, total int64, err error) {
	rows, err := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).Select("id, count(*) OVER ()").
		Order(f.order()).Limit(limit).Rows()
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &total); err != nil {
			return nil, 0, err
		}
		ids = append(ids, id)
	}
	return ids, total, rows.Err()
}

// Periods returns the distinct periods of the jobs f selects, at most
// limit, in order.
func Periods(ctx context.Context, s Store, db *gorm.DB, f Filter, limit int) ([]string, error) {
	var out []string
	err := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).Where("period IS NOT NULL").
		Distinct("period").Order("period").Limit(limit).Pluck("period", &out).Error
	return out, err
}

// Kinds returns the distinct kinds of the jobs f selects, in order.
func Kinds(ctx context.Context, s Store, db *gorm.DB, f Filter) ([]string, error) {
	var out []string
	err := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).Distinct("kind").Order("kind").Pluck("kind", &out).Error
	return out, err
}
