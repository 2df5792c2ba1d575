package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Copy on SQLite, which has no COPY: prepared multi-row INSERTs in one
// transaction, bound to the jobs' values as they are, so that SQLite
// parses no JSON, and the payload as bytes, so that the trigger that turns
// text into bytes finds nothing to do. The trigger still costs some 15% of
// the bulk by being there: SQLite stages the rows of a multi-row
// INSERT into a table with row triggers in a temporary table, and keeps a
// statement journal for it.

// copyRows is how many jobs one INSERT of Copy writes: enough that the
// calls cost little beside SQLite's work, few enough that the statement
// and its bound values stay small.
const copyRows = 500

// copyColumn is a column Copy writes: how a job binds it, its run time
// reckoned from t, and whether two jobs bind the same value.
type copyColumn struct {
	name  string
	value func(j *NewJob, t time.Time) any
	same  func(a, b *NewJob, t time.Time) bool
}

// sqliteCopyColumns are the columns of PostgreSQL's COPY (copyColumns).
var sqliteCopyColumns = []copyColumn{
	{"kind", func(j *NewJob, _ time.Time) any { return j.Kind },
		func(a, b *NewJob, _ time.Time) bool { return a.Kind == b.Kind }},
	{"queue", func(j *NewJob, _ time.Time) any { return j.Queue },
		func(a, b *NewJob, _ time.Time) bool { return a.Queue == b.Queue }},
	{"priority", func(j *NewJob, _ time.Time) any { return int64(j.Priority) },
		func(a, b *NewJob, _ time.Time) bool { return a.Priority == b.Priority }},
	{"payload", func(j *NewJob, _ time.Time) any { return []byte(j.Payload) },
		func(a, b *NewJob, _ time.Time) bool { return a.Payload == b.Payload }},
	optionalText("correlation_id", func(j *NewJob) *string { return j.Correlation }),
	{"max_attempts", func(j *NewJob, _ time.Time) any { return int64(j.Attempts) },
		func(a, b *NewJob, _ time.Time) bool { return a.Attempts == b.Attempts }},
	optionalText("backoff", func(j *NewJob) *string { return j.Backoff }),
	{"run_at", func(j *NewJob, t time.Time) any { return sqliteTime(runAt(*j, t)) },
		func(a, b *NewJob, t time.Time) bool { return runAt(*a, t).Equal(runAt(*b, t)) }},
	optionalText("auth", func(j *NewJob) *string { return j.Auth }),
	optionalText("run_id", func(j *NewJob) *string { return j.RunID }),
	optionalText("period", func(j *NewJob) *string { return j.Period }),
	{"meta", func(j *NewJob, _ time.Time) any { return bytesOrNil(j.Metadata) },
		func(a, b *NewJob, _ time.Time) bool { return bytes.Equal(a.Metadata, b.Metadata) }},
	optionalText("limit_key", func(j *NewJob) *string { return j.LimitKey }),
}

// optionalText is a column of text that a job may lack. Its value is the
// string itself, sparing database/sql the reflection it spends on a
// pointer.
func optionalText(name string, field func(*NewJob) *string) copyColumn {
	return copyColumn{name,
		func(j *NewJob, _ time.Time) any {
			if p := field(j); p != nil {
				return *p
			}
			return nil
		},
		func(a, b *NewJob, _ time.Time) bool {
			pa, pb := field(a), field(b)
			return pa == pb || pa != nil && pb != nil && *pa == *pb
		}}
}

// copyPlan is how one Copy binds its jobs: each column that all the jobs
// share (most are, in a bulk) once, as a numbered parameter after
// created_at (?1); the others for each row, as anonymous parameters.
// Binding looks a parameter's name up in the list of the numbered ones,
// which numbering every row's would make quadratic.
type copyPlan struct {
	shared, varying []int // indexes into sqliteCopyColumns
}

func planCopy(jobs []NewJob, t time.Time) copyPlan {
	same := make([]bool, len(sqliteCopyColumns))
	for c := range same {
		same[c] = true
	}
	first := &jobs[0]
	for i := 1; i < len(jobs); i++ {
		for c, col := range sqliteCopyColumns {
			same[c] = same[c] && col.same(first, &jobs[i], t)
		}
	}
	var p copyPlan
	for c := range same {
		if same[c] {
			p.shared = append(p.shared, c)
		} else {
			p.varying = append(p.varying, c)
		}
	}
	return p
}

// statement is the INSERT of n jobs.
func (p copyPlan) statement(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO sheaf_jobs (created_at")
	for _, c := range slices.Concat(p.shared, p.varying) {
		b.WriteString(", " + sqliteCopyColumns[c].name)
	}
	b.WriteString(") VALUES ")
	row := "(?1"
	for i := range p.shared {
		row += fmt.Sprintf(", ?%d", i+2)
	}
	row += strings.Repeat(", ?", len(p.varying)) + ")"
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// CopyRows is Copy of the jobs row gives, all prepared first.
func (s *sqlite) CopyRows(ctx context.Context, n int, row func(i int) (NewJob, error)) (int64, error) {
	jobs, err := gather(n, row)
	if err != nil {
		return 0, err
	}
	return s.Copy(ctx, jobs)
}

// Copy inserts jobs copyRows to a statement in one transaction, and wakes
// the runners once it has committed.
func (s *sqlite) Copy(ctx context.Context, jobs []NewJob) (n int64, err error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	t := now()
	p := planCopy(jobs, t)
	head := []any{sqliteTime(t)}
	for _, c := range p.shared {
		head = append(head, sqliteCopyColumns[c].value(&jobs[0], t))
	}
	back := dueSet{}
	err = s.writing(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var full *sql.Stmt // the statement of copyRows jobs
		if len(jobs) >= copyRows {
			if full, err = tx.PrepareContext(ctx, p.statement(copyRows)); err != nil {
				return err
			}
			defer full.Close()
		}
		args := make([]any, 0, len(head)+min(len(jobs), copyRows)*len(p.varying))
		for start := 0; start < len(jobs); start += copyRows {
			chunk := jobs[start:min(start+copyRows, len(jobs))]
			args = append(args[:0], head...)
			for i := range chunk {
				j := &chunk[i]
				back.add(j.Queue, j.Priority, runAt(*j, t))
				for _, c := range p.varying {
					args = append(args, sqliteCopyColumns[c].value(j, t))
				}
			}
			var res sql.Result
			if len(chunk) < copyRows {
				res, err = tx.ExecContext(ctx, p.statement(len(chunk)), args...)
			} else {
				res, err = full.ExecContext(ctx, args...)
			}
			if err != nil {
				return err
			}
			rows, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += rows
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, err
	}
	s.notify(back.list())
	return n, nil
}

// dueSet gathers, of many new jobs, what notify needs: the earliest run
// time of each queue and priority.
type dueSet map[queuePriority]time.Time

type queuePriority struct {
	queue    string
	priority int
}

func (d dueSet) add(queue string, priority int, runAt time.Time) {
	k := queuePriority{queue, priority}
	if first, ok := d[k]; !ok || runAt.Before(first) {
		d[k] = runAt
	}
}

func (d dueSet) list() []due {
	out := make([]due, 0, len(d))
	for k, runAt := range d {
		out = append(out, due{queue: k.queue, priority: k.priority, runAt: runAt})
	}
	return out
}
