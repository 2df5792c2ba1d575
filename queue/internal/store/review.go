package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
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

// OnlyRun reports whether f selects the jobs of a run and nothing else:
// what the runs roll-up keeps of a finished run answers such a filter.
func (f Filter) OnlyRun() bool {
	return f.RunID != "" && reflect.DeepEqual(f, Filter{RunID: f.RunID})
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
// that retention prunes; kept is then what was kept of the run (nil when
// the jobs were counted).
func CountKindStatus(ctx context.Context, s Store, db *gorm.DB, f Filter) (counts []KindStatus, kept *KeptRun, err error) {
	if f.OnlyRun() {
		if kept, err := keptRun(ctx, db, f.RunID); err != nil || kept != nil {
			if err != nil {
				return nil, nil, err
			}
			return kept.Kinds, kept, nil
		}
	}
	rows, err := f.apply(db.WithContext(ctx).Table(JobsTable), timeArg(s)).
		Select("kind, status, count(*), min(started_at)").Group("kind, status").Order("kind, status").Rows()
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []KindStatus
	for rows.Next() {
		var r KindStatus
		var first sqlTime
		if err := rows.Scan(&r.Kind, &r.Status, &r.N, &first); err != nil {
			return nil, nil, err
		}
		r.FirstStart = first.t
		out = append(out, r)
	}
	return out, nil, rows.Err()
}

// KeptRun is what the runs roll-up kept of a finished run for its review:
// its counts by kind and status, the digest of what was kept (Basis; see
// RunSlow), and the page of slow jobs a review kept against that digest
// (nil if none).
type KeptRun struct {
	Kinds []KindStatus
	Basis string
	Slow  *RunSlow
}

// keptRun reads, in one row, what the runs roll-up kept of run; nil when
// nothing is (the run has not finished, or has changed since, which clears
// its counts, or its counts were kept before schema version 23).
func keptRun(ctx context.Context, db *gorm.DB, run string) (*KeptRun, error) {
	var rows []struct{ Kinds, LastFinished, MaxID, Slow sql.NullString }
	err := db.WithContext(ctx).Table(RunsTable).Select("kinds, last_finished, max_id, slow").
		Where("run_id = ? AND counts IS NOT NULL", run).Scan(&rows).Error
	if err != nil || len(rows) == 0 || !rows[0].Kinds.Valid {
		return nil, err
	}
	r := rows[0]
	kinds, err := parseKinds(run, r.Kinds.String)
	if err != nil {
		return nil, err
	}
	// A job run again (which clears the counts) finishes later, and a job
	// added to the run has a higher ID: counts kept again after either
	// have another basis, even if they are the same.
	sum := sha256.Sum256([]byte(r.Kinds.String + "\x00" + r.LastFinished.String + "\x00" + r.MaxID.String))
	kept := &KeptRun{Kinds: kinds, Basis: hex.EncodeToString(sum[:16])}
	if r.Slow.Valid {
		slow := new(RunSlow)
		if err := json.Unmarshal([]byte(r.Slow.String), slow); err != nil {
			return nil, fmt.Errorf("run %q: kept slow jobs: %w", run, err)
		}
		if slow.Basis == kept.Basis {
			kept.Slow = slow
		}
	}
	return kept, nil
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

// RunSlow is the first page of a finished run's slow jobs, and how many
// there are, as a review found them: the completed jobs of each kind that
// ran at least its threshold, in ID order. KeepSlow keeps it with the
// run's counts; CountKindStatus reads it back (KeptRun.Slow).
type RunSlow struct {
	// Basis is a digest of what the runs roll-up kept of the run when the
	// page was found (its counts by kind and status, latest finish and
	// highest job ID): a retry or a job added to the run, and the counts
	// kept again after it, make a page found before them stale.
	Basis string `json:"basis"`
	// Thresholds are in nanoseconds, by kind.
	Thresholds map[string]int64 `json:"thresholds"`
	Limit      int              `json:"limit"`
	IDs        []int64          `json:"ids"`
	Total      int64            `json:"total"`
}

// Answers reports whether r is the answer to a slow-job read of its run
// with these thresholds, for a page of at most limit jobs: the first
// limit of r's IDs are then that page (r's Limit is at least limit, or r
// holds every slow job).
func (r *RunSlow) Answers(thresholds map[string]time.Duration, limit int) bool {
	if r == nil || len(r.Thresholds) != len(thresholds) || (r.Limit < limit && int64(len(r.IDs)) < r.Total) {
		return false
	}
	for k, d := range thresholds {
		if n, ok := r.Thresholds[k]; !ok || n != int64(d) {
			return false
		}
	}
	return true
}

// NewRunSlow is the RunSlow of a slow-job read of a run whose kept counts
// have digest basis.
func NewRunSlow(basis string, thresholds map[string]time.Duration, limit int, ids []int64, total int64) RunSlow {
	r := RunSlow{Basis: basis, Thresholds: make(map[string]int64, len(thresholds)), Limit: limit, IDs: ids, Total: total}
	for k, d := range thresholds {
		r.Thresholds[k] = int64(d)
	}
	return r
}

// KeepSlow keeps r with run's counts, if they are still kept; a run whose
// counts were cleared since r was found keeps nothing, and so does a db
// inside a transaction (a write refused there, by a read-only one, say,
// would end it on PostgreSQL). It writes as s writes (on SQLite, in the
// process's turn).
func KeepSlow(ctx context.Context, s Store, db *gorm.DB, run string, r RunSlow) error {
	if inTx(db) {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	set := "?"
	if s.Dialect() == "postgres" {
		set = "CAST(? AS jsonb)"
	}
	return s.Tx(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("UPDATE "+RunsTable+" SET slow = "+set+" WHERE run_id = ? AND counts IS NOT NULL", string(b), run).Error
	})
}
