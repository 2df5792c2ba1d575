package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Pruning finished jobs, and the day roll-ups that keep their history
// (schema version 9). The statements are the same on both databases but
// for how times, days, JSON and lists of IDs are bound and read, and for
// row locks, which only PostgreSQL takes (SQLite writes one transaction at
// a time).

// Keeper prunes finished jobs and keeps their day roll-ups.
type Keeper interface {
	// Prune deletes, in one transaction, at most p.Limit finished jobs
	// that p's rules no longer keep, with their recorded attempts and the
	// audit entries that target them alone, walking finished jobs from
	// p.After on by (completed_at, id). A job is kept while another job
	// of its run or of its period is not yet due for deletion itself
	// (not finished, or kept longer): its dependants may still need it.
	// Archive, if set, sees the jobs first, in the transaction; its error
	// rolls the batch back.
	Prune(ctx context.Context, p Prune) (PruneResult, error)
	// FirstFinished returns when the earliest finished job finished;
	// ok is false when there is none.
	FirstFinished(ctx context.Context) (t time.Time, ok bool, err error)
	// Finished calls each for every job that finished in [from, to).
	Finished(ctx context.Context, from, to time.Time, each func(FinishedJob)) error
	// PutDay replaces the roll-ups of day (a Day string) with rows and
	// records day+1 as the first day not final, in one transaction.
	PutDay(ctx context.Context, day string, rows []DayRow) error
	// FinalBefore returns the first day whose roll-up is not final (""
	// before the first roll-up).
	FinalBefore(ctx context.Context) (string, error)
	// Days reads the roll-ups q selects, by day, kind and queue.
	Days(ctx context.Context, db *gorm.DB, q DayQuery) ([]DayRow, error)
	// DropDays deletes the roll-ups of the days before before.
	DropDays(ctx context.Context, before string) (int64, error)
}

// DayLayout is how a day is written: a UTC date.
const DayLayout = "2006-01-02"

// Prune asks for one batch of deletions.
type Prune struct {
	// Rules say until when finished jobs are kept, the first of a kind and
	// status, then the status's with Kind "". A job no rule covers, or
	// whose rule is Forever, is kept.
	Rules []KeepRule
	// After is where the walk starts: jobs finished after it (by
	// completed_at, then id). Zero: from the oldest.
	After Place
	// Limit is how many jobs the batch examines, at most.
	Limit int
	// Archive, if set, receives the IDs of the batch's jobs in the
	// transaction that deletes them, before they are deleted.
	Archive func(tx *gorm.DB, ids []int64) error
	// Kinds are the kinds whose finished jobs the walk reads, as an
	// earlier batch of the pass found them (PruneResult.Kinds); nil: the
	// batch finds them. A kind whose first job finished since is only
	// recent, and the next pass reads it.
	Kinds []string
	// HeldRuns and HeldPeriods are runs and periods that an earlier batch
	// of the pass found holding a job not due: the walk passes over their
	// jobs, which the pass would keep anyway, rather than read and lock
	// them batch after batch (a night's period that its failures keep is
	// a hundred batches of a hundred thousand jobs).
	HeldRuns, HeldPeriods []string
	// DuePeriods are periods that an earlier batch of the pass read whole
	// and found with every job due: the batch trusts the finding rather
	// than read each again. The caller keeps a finding briefly (see
	// maintain.PeriodRecheck).
	DuePeriods []string
}

// KeepRule keeps the jobs of a status (and, if Kind is set, of a kind)
// that finished at or after Before, or all of them if Forever.
type KeepRule struct {
	Kind, Status string
	Before       time.Time
	Forever      bool
}

// Place is a finished job's place in the walk, when it finished and its
// ID, with the span of finish times the next batch reads from it (see
// keeping.candidates).
type Place struct {
	At   time.Time
	ID   int64
	Span time.Duration
}

// PruneResult is what a batch did: the IDs it deleted, where the next
// batch starts, and whether the walk reached the last job due.
type PruneResult struct {
	Deleted []int64
	Next    Place
	Done    bool
	// Kinds are the kinds the walk read, for the pass's next batch.
	Kinds []string
	// HeldRuns and HeldPeriods are the runs and periods the batch found
	// holding a job not due, DuePeriods the periods it read and found
	// with every job due, for the pass's next batches (see Prune).
	HeldRuns, HeldPeriods, DuePeriods []string
}

// FinishedJob is a finished job as a roll-up reads it.
type FinishedJob struct {
	Kind, Queue, Status string
	Attempts            int
	Started, Finished   *time.Time
	LastError           *string
}

// DayRow is one day's roll-up of a kind on a queue. Durations are in
// microseconds; Errors is a JSON object of counts by error shape.
type DayRow struct {
	Day, Kind, Queue               string
	Completed, Failed, Cancelled   int64
	Retries, P50us, P95us, MaxUsec int64
	Errors                         []byte
}

// DayQuery selects roll-ups: From inclusive, To exclusive (Day strings),
// and Kind and Queue if set.
type DayQuery struct {
	Kind, Queue, From, To string
}

// keeping is what tells the two databases' statements apart.
type keeping struct {
	at      func(time.Time) any // binds a time
	ts      string              // a bound time in an expression
	day     string              // a bound day
	dayText string              // a day column read as text: %s is the column
	json    string              // a bound JSON text
	never   string              // a time before which nothing is: NULL, typed
	lock    string              // what locks the rows a batch deletes
	share   string              // what locks a run's row against changes
	upsert  string              // how the roll-up's row is replaced
	in      func(col string, ids []int64) (string, []any)
	// kinds selects the kinds that have finished jobs (and may select
	// others); kindIn is a condition that a kind (%s) is among them.
	kinds, kindIn string
	// auditIn is a condition that an audit entry targets one of ids.
	auditIn func(_ string, ids []int64) (string, []any)
}

var pgKeeping = keeping{
	kinds: finishedKinds, kindIn: "%s = ANY (ARRAY(" + finishedKinds + "))",
	at: pgTime, ts: "CAST(? AS timestamptz)", day: "CAST(? AS date)", dayText: "to_char(%s, 'YYYY-MM-DD')",
	json: "CAST(? AS jsonb)", never: "CAST(NULL AS timestamptz)", lock: " FOR UPDATE SKIP LOCKED", share: " FOR SHARE",
	upsert: excludedFinal,
	in: func(col string, ids []int64) (string, []any) {
		return col + " = ANY(CAST(? AS bigint[]))", []any{IDListValue(ids)}
	},
	auditIn: func(_ string, ids []int64) (string, []any) {
		return "target ->> 'job' = ANY(CAST(? AS text[]))", []any{IDListValue(ids)}
	},
}

// keepingOf returns s's keeping.
func keepingOf(s Store) keeping {
	switch s.Dialect() {
	case "sqlite":
		return sqliteKeeping
	case "mysql":
		return mysqlKeeping
	}
	return pgKeeping
}

// excludedFinal replaces the roll-up's row on PostgreSQL and SQLite.
const excludedFinal = "ON CONFLICT (id) DO UPDATE SET final_before = excluded.final_before"

var sqliteKeeping = keeping{
	kinds: finishedKinds, kindIn: "%s IN (" + finishedKinds + ")",
	at: sqliteTime, ts: "?", day: "?", dayText: "%s", json: "?", never: "NULL", upsert: excludedFinal,
	in: func(col string, ids []int64) (string, []any) { return inList(col, "?"), []any{jsonIDs(ids)} },
	auditIn: func(_ string, ids []int64) (string, []any) {
		return "CAST(target AS TEXT) ->> '$.job' IN (SELECT value FROM json_each(?))", []any{jsonIDs(ids)}
	},
}

// finishedStatuses is the predicate of index sheaf_jobs_finished, in its
// words (SQLite uses a partial index only for a query that repeats it).
const finishedStatuses = "status IN ('COMPLETED', 'FAILED', 'CANCELLED')"

// finishedKinds selects the kinds that have finished jobs, in order, one
// descent of sheaf_jobs_finished each: neither PostgreSQL 15 nor SQLite
// skips through an index by its first column on its own.
const finishedKinds = `WITH RECURSIVE fk(kind) AS (
	SELECT (SELECT kind FROM sheaf_jobs WHERE ` + finishedStatuses + ` ORDER BY kind LIMIT 1)
	UNION ALL
	SELECT (SELECT f.kind FROM sheaf_jobs f WHERE f.` + finishedStatuses + ` AND f.kind > fk.kind ORDER BY f.kind LIMIT 1)
	FROM fk WHERE fk.kind IS NOT NULL
) SELECT kind FROM fk WHERE kind IS NOT NULL`

// isFinished is a condition that the job aliased a is finished, through
// sheaf_jobs_finished: the index is by kind, then finish time, so a read
// of the jobs that finished in a span of time names the kinds, and the
// database reads the span of each.
func (k keeping) isFinished(a string) string {
	return a + "." + finishedStatuses + " AND " + fmt.Sprintf(k.kindIn, a+".kind")
}

// keptUntil is the time before which the job aliased a finished no
// longer keeps it, or NULL if kept: a CASE over the rules.
func (k keeping) keptUntil(a string, rules []KeepRule) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString("CASE")
	for _, r := range rules {
		b.WriteString(" WHEN ")
		if r.Kind != "" {
			b.WriteString(a + ".kind = ? AND ")
			args = append(args, r.Kind)
		}
		b.WriteString(a + ".status = ? THEN ")
		args = append(args, r.Status)
		if r.Forever {
			// Typed: a CASE whose every branch is an untyped NULL is
			// text to PostgreSQL, which compares no time with it.
			b.WriteString(k.never)
		} else {
			b.WriteString(k.ts)
			args = append(args, k.at(r.Before))
		}
	}
	b.WriteString(" END")
	return b.String(), args
}

// due is a condition that the job aliased a is finished and due for
// deletion.
func (k keeping) due(a string, rules []KeepRule) (string, []any) {
	until, args := k.keptUntil(a, rules)
	return "(" + a + "." + finishedStatuses + " AND " + a + ".completed_at < " + until + ")", args
}

// candidatesSQL selects, locked, up to limit jobs of kinds due for
// deletion after place from and finished before end, in order, with their
// runs and periods. sheaf_jobs_finished is by kind, then finish time: the
// statement reads the span [from, end) of each kind and sorts what it
// found, so the caller keeps the span to about a batch's jobs (see
// candidates).
func (k keeping) candidatesSQL(p Prune, from Place, end time.Time, limit int) (q string, args []any) {
	due, dueArgs := k.due("j", p.Rules)
	q = `SELECT j.id, j.completed_at, j.run_id, j.period FROM sheaf_jobs j
	WHERE j.kind IN ? AND j.` + finishedStatuses + ` AND j.completed_at >= ` + k.ts + ` AND j.completed_at < ` + k.ts + `
		AND (j.completed_at, j.id) > (` + k.ts + `, ?) AND ` + due
	args = append([]any{p.Kinds, k.at(from.At), k.at(end), k.at(from.At), from.ID}, dueArgs...)
	// An empty list would be IN (NULL), which keeps no row.
	for _, held := range []struct {
		col  string
		vals []string
	}{{"run_id", p.HeldRuns}, {"period", p.HeldPeriods}} {
		if len(held.vals) > 0 {
			q += " AND (j." + held.col + " IS NULL OR j." + held.col + " NOT IN ?)"
			args = append(args, held.vals)
		}
	}
	return q + " ORDER BY j.completed_at, j.id LIMIT ?" + k.lock, append(args, limit)
}

// lastDue is the latest time before which a rule deletes, and false if
// every rule keeps forever.
func lastDue(rules []KeepRule) (last time.Time, ok bool) {
	for _, r := range rules {
		if !r.Forever && (!ok || r.Before.After(last)) {
			last, ok = r.Before, true
		}
	}
	return last, ok
}

// candidate is a job a batch may delete, with its run and period.
type candidate struct {
	id          int64
	run, period sql.NullString
}

// firstSpan is the span of finish times a pass's first batch reads.
const firstSpan = time.Minute

// candidates reads, locked, up to p.Limit jobs due for deletion from
// p.After on, oldest first across kinds, and returns where the next batch
// starts, or done if the walk reached the latest time a rule deletes
// before: the walk ends there, or the batch that finds fewer than a batch
// of jobs due would read every finished job after them (a second and a
// half on a table of a million), only to find each of them kept.
//
// The jobs are read a span of finish times at a time, sized by the last
// batch to hold about a batch of jobs, and doubled past a span that held
// fewer: a batch reads about the jobs it deletes, and deletes jobs that
// finished together, whose rows share pages, whatever their kinds. (A walk
// kind by kind, one index range each, rewrote every page once per kind:
// pruning a table of five kinds took twice as long.)
func (k keeping) candidates(tx *gorm.DB, p Prune) (out []candidate, next Place, done bool, err error) {
	last, ok := lastDue(p.Rules)
	if !ok {
		return nil, next, true, nil // every job is kept forever
	}
	if len(p.Kinds) == 0 {
		return nil, next, true, nil // no finished job
	}
	at := p.After
	if at.At.IsZero() && at.ID == 0 {
		first, ok, err := k.firstFinished(tx.Statement.Context, tx)
		if err != nil || !ok {
			return nil, next, err == nil, err
		}
		at = Place{At: first, Span: firstSpan}
	}
	span := max(at.Span, time.Millisecond)
	for at.At.Before(last) {
		end := at.At.Add(span)
		if end.After(last) {
			end = last
		}
		q, args := k.candidatesSQL(p, at, end, p.Limit-len(out))
		got, place, err := scanCandidates(tx, q, args, out)
		if err != nil {
			return nil, next, false, err
		}
		if len(got) == p.Limit {
			// Full: the next batch reads a span that held about as many.
			place.Span = max(place.At.Sub(at.At)*time.Duration(p.Limit)/time.Duration(max(len(got)-len(out), 1)), time.Millisecond)
			return got, place, false, nil
		}
		out = got
		at, span = Place{At: end}, 2*span
	}
	return out, Place{}, true, nil
}

// scanCandidates appends to out the candidates q selects, and returns the
// last one's place.
func scanCandidates(tx *gorm.DB, q string, args []any, out []candidate) ([]candidate, Place, error) {
	var last Place
	rows, err := tx.Raw(q, args...).Rows()
	if err != nil {
		return nil, last, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			c  candidate
			at sqlTime
		)
		if err := rows.Scan(&c.id, &at, &c.run, &c.period); err != nil {
			return nil, last, err
		}
		out = append(out, c)
		last = Place{At: at.t, ID: c.id}
	}
	return out, last, rows.Err()
}

// blocked returns those of vals, runs or periods (col), that have a job
// not due for deletion. It looks each value of a batch (a few) up in its
// index on its own, and only until its first job not due: a run of a
// hundred thousand jobs with a failure kept longer than its completed
// jobs is found blocked at its first failure, where one statement for all
// the values read every job of each, at every batch of the walk. A run is
// first judged from its row in sheaf_runs (runVerdict), and its jobs are
// read only when the row cannot tell.
func (k keeping) blocked(tx *gorm.DB, col string, vals map[string]bool, rules []KeepRule) (map[string]bool, error) {
	due, dueArgs := k.due("o", rules)
	q := "SELECT EXISTS (SELECT 1 FROM sheaf_jobs o WHERE o." + col + " = ? AND NOT coalesce(" + due + ", false))"
	blocked := map[string]bool{}
	for v := range vals {
		if col == "run_id" {
			switch judged, err := k.runVerdict(tx, v, rules); {
			case err != nil:
				return nil, err
			case judged == runOpen:
				blocked[v] = true
				continue
			case judged == runDue:
				continue
			}
		}
		var b bool
		if err := tx.Raw(q, append([]any{v}, dueArgs...)...).Row().Scan(&b); err != nil {
			return nil, err
		}
		if b {
			blocked[v] = true
		}
	}
	return blocked, nil
}

// verdict is what a run's kept counts say of its jobs (see runVerdict).
type verdict int

const (
	runUnknown verdict = iota // the jobs must be looked up
	runOpen                   // a job is not due: the run is kept
	runDue                    // every job is due
)

// runVerdict tells from run's row in sheaf_runs, without reading its jobs,
// whether every job of the run is due for deletion. A run whose counts are
// not kept yet is open: it keeps its jobs until they are, so that it stays
// listed with them. Every job is due when its counts are kept (so every
// job has finished, and none has been added or restarted since, which
// would have cleared them), each kind and status it holds has a rule that
// deletes, and its last job finished before every such rule's time: a run
// of a hundred thousand jobs, all due, is then not read whole at each of
// its hundred batches. The row is locked for share, so a job added to the
// run or restarted meanwhile, which clears the counts, waits for the batch
// to end, or is seen by it (SQLite's transaction holds the file).
// runUnknown: the row cannot tell (no row, counts kept before schema
// version 23, or a job finished too late).
func (k keeping) runVerdict(tx *gorm.DB, run string, rules []KeepRule) (verdict, error) {
	var (
		kept  bool
		kinds sql.NullString
		last  sqlTime
	)
	err := tx.Raw("SELECT counts IS NOT NULL, kinds, last_finished FROM "+RunsTable+" WHERE run_id = ?"+k.share, run).
		Row().Scan(&kept, &kinds, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return runUnknown, nil
	case err != nil:
		return runUnknown, err
	case !kept:
		return runOpen, nil
	case !kinds.Valid || !last.valid:
		return runUnknown, nil
	}
	groups, err := parseKinds(run, kinds.String)
	if err != nil {
		return runUnknown, err
	}
	for _, g := range groups {
		r, ok := ruleOf(rules, g.Kind, g.Status)
		if !ok || r.Forever {
			return runOpen, nil
		}
		if !last.t.Before(r.Before) {
			return runUnknown, nil
		}
	}
	return runDue, nil
}

// ruleOf returns the rule that keeps jobs of kind and status, as keptUntil
// picks it: the first that names the status and the kind or no kind.
func ruleOf(rules []KeepRule, kind, status string) (KeepRule, bool) {
	for _, r := range rules {
		if r.Status == status && (r.Kind == "" || r.Kind == kind) {
			return r, true
		}
	}
	return KeepRule{}, false
}

func (k keeping) prune(tx *gorm.DB, p Prune) (PruneResult, error) {
	var res PruneResult
	if p.Limit < 1 {
		return res, fmt.Errorf("prune: limit %d not positive", p.Limit)
	}
	if p.Kinds == nil {
		if _, ok := lastDue(p.Rules); ok {
			if err := tx.Raw(k.kinds).Scan(&p.Kinds).Error; err != nil {
				return res, err
			}
		}
	}
	res.Kinds = p.Kinds
	cands, next, done, err := k.candidates(tx, p)
	if err != nil {
		return res, err
	}
	res.Next, res.Done = next, done
	runs, periods := map[string]bool{}, map[string]bool{}
	for _, c := range cands {
		if c.run.Valid {
			runs[c.run.String] = true
		}
		if c.period.Valid {
			periods[c.period.String] = true
		}
	}
	if runs, err = k.blocked(tx, "run_id", runs, p.Rules); err != nil {
		return res, err
	}
	for _, v := range p.DuePeriods {
		delete(periods, v)
	}
	toRead := periods
	if periods, err = k.blocked(tx, "period", toRead, p.Rules); err != nil {
		return res, err
	}
	for v := range toRead {
		if !periods[v] {
			res.DuePeriods = append(res.DuePeriods, v)
		}
	}
	res.HeldRuns, res.HeldPeriods = slices.Sorted(maps.Keys(runs)), slices.Sorted(maps.Keys(periods))
	slices.Sort(res.DuePeriods)
	for _, c := range cands {
		if !(c.run.Valid && runs[c.run.String]) && !(c.period.Valid && periods[c.period.String]) {
			res.Deleted = append(res.Deleted, c.id)
		}
	}
	if len(res.Deleted) == 0 {
		return res, nil
	}
	if p.Archive != nil {
		if err := p.Archive(tx, res.Deleted); err != nil {
			return PruneResult{}, fmt.Errorf("archive: %w", err)
		}
	}
	// Audit entries that target one job name it as {"job": id}; those that
	// target a filter or a list of jobs stay.
	for _, del := range []struct {
		table string
		in    func(col string, ids []int64) (string, []any)
		col   string
	}{{"sheaf_attempts", k.in, "job_id"}, {"sheaf_audit", k.auditIn, ""}, {JobsTable, k.in, "id"}} {
		cond, args := del.in(del.col, res.Deleted)
		if err := tx.Exec("DELETE FROM "+del.table+" WHERE "+cond, args...).Error; err != nil {
			return PruneResult{}, fmt.Errorf("prune %s: %w", del.table, err)
		}
	}
	return res, nil
}

func (k keeping) firstFinished(ctx context.Context, db *gorm.DB) (time.Time, bool, error) {
	// Each kind's first, one index descent each: a min over the kinds'
	// spans at once would read every finished job.
	var at sqlTime
	err := db.WithContext(ctx).Raw(`SELECT min((SELECT j.completed_at FROM sheaf_jobs j WHERE j.kind = k.kind AND j.` + finishedStatuses + `
		ORDER BY j.completed_at LIMIT 1)) FROM (` + k.kinds + `) k`).Row().Scan(&at)
	return at.t, at.valid, err
}

func (k keeping) finished(ctx context.Context, db *gorm.DB, from, to time.Time, each func(FinishedJob)) error {
	rows, err := db.WithContext(ctx).Raw(`SELECT kind, queue, status, attempts, started_at, completed_at, substr(last_error, 1, 500)
		FROM sheaf_jobs j WHERE `+k.isFinished("j")+` AND completed_at >= `+k.ts+` AND completed_at < `+k.ts,
		k.at(from), k.at(to)).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			j                  FinishedJob
			started, completed sqlTime
		)
		if err := rows.Scan(&j.Kind, &j.Queue, &j.Status, &j.Attempts, &started, &completed, &j.LastError); err != nil {
			return err
		}
		j.Started, j.Finished = started.ptr(), completed.ptr()
		each(j)
	}
	return rows.Err()
}

func (k keeping) putDay(tx *gorm.DB, day string, rows []DayRow) error {
	if err := tx.Exec("DELETE FROM sheaf_history WHERE day = "+k.day, day).Error; err != nil {
		return err
	}
	for _, r := range rows {
		var errs any
		if r.Errors != nil {
			errs = string(r.Errors)
		}
		if err := tx.Exec(`INSERT INTO sheaf_history (day, kind, queue, completed, failed, cancelled, retries, p50_us, p95_us, max_us, errors)
			VALUES (`+k.day+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+k.json+`)`,
			day, r.Kind, r.Queue, r.Completed, r.Failed, r.Cancelled, r.Retries, r.P50us, r.P95us, r.MaxUsec, errs).Error; err != nil {
			return err
		}
	}
	d, err := time.Parse(DayLayout, day)
	if err != nil {
		return err
	}
	return tx.Exec(`INSERT INTO sheaf_rollup (id, final_before) VALUES (1, `+k.day+`) `+k.upsert, d.AddDate(0, 0, 1).Format(DayLayout)).Error
}

func (k keeping) finalBefore(ctx context.Context, db *gorm.DB) (string, error) {
	var days []string
	err := db.WithContext(ctx).Raw("SELECT " + fmt.Sprintf(k.dayText, "final_before") + " FROM sheaf_rollup").Scan(&days).Error
	if err != nil || len(days) == 0 {
		return "", err
	}
	return days[0], nil
}

func (k keeping) days(ctx context.Context, db *gorm.DB, q DayQuery) ([]DayRow, error) {
	s := "SELECT " + fmt.Sprintf(k.dayText, "day") + `, kind, queue, completed, failed, cancelled, retries, p50_us, p95_us, max_us, errors
		FROM sheaf_history WHERE day >= ` + k.day + " AND day < " + k.day
	args := []any{q.From, q.To}
	for _, c := range []struct{ col, val string }{{"kind", q.Kind}, {"queue", q.Queue}} {
		if c.val != "" {
			s += " AND " + c.col + " = ?"
			args = append(args, c.val)
		}
	}
	rows, err := db.WithContext(ctx).Raw(s+" ORDER BY day, kind, queue", args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DayRow
	for rows.Next() {
		var r DayRow
		if err := rows.Scan(&r.Day, &r.Kind, &r.Queue, &r.Completed, &r.Failed, &r.Cancelled, &r.Retries,
			&r.P50us, &r.P95us, &r.MaxUsec, &r.Errors); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (k keeping) dropDays(ctx context.Context, db *gorm.DB, before string) (int64, error) {
	res := db.WithContext(ctx).Exec("DELETE FROM sheaf_history WHERE day < "+k.day, before)
	return res.RowsAffected, res.Error
}

// The methods of Keeper on each database: PostgreSQL's on its pool,
// SQLite's writes in the process's turn to write.

func (s *postgres) Prune(ctx context.Context, p Prune) (res PruneResult, err error) {
	err = s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		res, err = pgKeeping.prune(tx, p)
		return err
	})
	return res, err
}

func (s *postgres) FirstFinished(ctx context.Context) (time.Time, bool, error) {
	return pgKeeping.firstFinished(ctx, s.gdb)
}

func (s *postgres) Finished(ctx context.Context, from, to time.Time, each func(FinishedJob)) error {
	return pgKeeping.finished(ctx, s.gdb, from, to, each)
}

func (s *postgres) PutDay(ctx context.Context, day string, rows []DayRow) error {
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error { return pgKeeping.putDay(tx, day, rows) })
}

func (s *postgres) FinalBefore(ctx context.Context) (string, error) {
	return pgKeeping.finalBefore(ctx, s.gdb)
}

func (s *postgres) Days(ctx context.Context, db *gorm.DB, q DayQuery) ([]DayRow, error) {
	return pgKeeping.days(ctx, db, q)
}

func (s *postgres) DropDays(ctx context.Context, before string) (int64, error) {
	return pgKeeping.dropDays(ctx, s.gdb, before)
}

func (s *sqlite) Prune(ctx context.Context, p Prune) (res PruneResult, err error) {
	err = s.Tx(ctx, s.gdb, func(tx *gorm.DB) error {
		res, err = sqliteKeeping.prune(tx, p)
		return err
	})
	return res, err
}

func (s *sqlite) FirstFinished(ctx context.Context) (time.Time, bool, error) {
	return sqliteKeeping.firstFinished(ctx, s.gdb)
}

func (s *sqlite) Finished(ctx context.Context, from, to time.Time, each func(FinishedJob)) error {
	return sqliteKeeping.finished(ctx, s.gdb, from, to, each)
}

func (s *sqlite) PutDay(ctx context.Context, day string, rows []DayRow) error {
	return s.Tx(ctx, s.gdb, func(tx *gorm.DB) error { return sqliteKeeping.putDay(tx, day, rows) })
}

func (s *sqlite) FinalBefore(ctx context.Context) (string, error) {
	return sqliteKeeping.finalBefore(ctx, s.gdb)
}

func (s *sqlite) Days(ctx context.Context, db *gorm.DB, q DayQuery) ([]DayRow, error) {
	return sqliteKeeping.days(ctx, db, q)
}

func (s *sqlite) DropDays(ctx context.Context, before string) (n int64, err error) {
	err = s.statement(ctx, s.gdb, func(db *gorm.DB) error {
		n, err = sqliteKeeping.dropDays(ctx, db, before)
		return err
	})
	return n, err
}
