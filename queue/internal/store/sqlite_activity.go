package store

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"time"
)

// activitySQLite reads the jobs that finished from ?1 to ?3, in queue ?2
// (empty for all), as activityPG selects them: 1 for COMPLETED, then completed_at,
// run_at and started_at as text, which the store parses faster than the
// driver would. The kinds are walked one index descent each, and SQLite,
// which has no bitmap scans, reads each kind's range in turn (CROSS JOIN
// keeps kinds outermost).
const activitySQLite = `
SELECT 1, j.completed_at || '', j.run_at || '', j.started_at || '' FROM (` + finishedKinds + `) kinds CROSS JOIN sheaf_jobs j
WHERE j.status = 'COMPLETED' AND j.` + finishedStatuses + ` AND j.kind = kinds.kind AND j.completed_at >= ?1 AND j.completed_at < ?3 AND (?2 = '' OR j.queue = ?2)
UNION ALL
SELECT 0, j.completed_at || '', j.run_at || '', j.started_at || '' FROM sheaf_jobs j
WHERE j.id IN (SELECT job_id FROM sheaf_attempts WHERE finished_at >= ?1 AND outcome IN ('failed', 'rescued'))
	AND j.status = 'FAILED' AND j.completed_at >= ?1 AND j.completed_at < ?3 AND (?2 = '' OR j.queue = ?2)`

// Activity reads the finished jobs and buckets them, and computes their
// percentiles, in the process: SQLite has no percentile aggregate.
func (s *sqlite) Activity(ctx context.Context, start, end time.Time, bucket time.Duration, queue string) ([]ActivityRow, error) {
	rows, err := s.db.QueryContext(ctx, activitySQLite, sqliteTime(start), queue, sqliteTime(end))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := activityBuckets{start: start, bucket: bucket}
	var completed bool
	var done, runAt, started sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&completed, &done, &runAt, &started); err != nil {
			return nil, err
		}
		d, err := parseStamp(done)
		if err != nil {
			return nil, err
		}
		if started == nil {
			b.add(completed, d, time.Time{}, nil)
			continue
		}
		due, err := parseStamp(runAt)
		if err != nil {
			return nil, err
		}
		st, err := parseStamp(started)
		if err != nil {
			return nil, err
		}
		b.add(completed, d, due, &st)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return b.rows(), nil
}

// activityBuckets buckets finished jobs, for the stores that compute the
// percentiles in the process.
type activityBuckets struct {
	start  time.Time
	bucket time.Duration
	m      map[int64]*ActivityRow
}

// add counts a job that finished at done, due at runAt and started at
// started (nil: never started).
func (b *activityBuckets) add(completed bool, done, runAt time.Time, started *time.Time) {
	i := int64(done.Sub(b.start) / b.bucket)
	if b.m == nil {
		b.m = map[int64]*ActivityRow{}
	}
	r := b.m[i]
	if r == nil {
		r = &ActivityRow{Start: b.start.Add(time.Duration(i) * b.bucket)}
		b.m[i] = r
	}
	if started == nil {
		r.add(completed, false, 0, 0)
		return
	}
	r.add(completed, true, started.Sub(runAt), done.Sub(*started))
}

// rows returns the buckets in order, their percentiles computed.
func (b *activityBuckets) rows() []ActivityRow {
	out := make([]ActivityRow, 0, len(b.m))
	for _, i := range slices.Sorted(maps.Keys(b.m)) {
		b.m[i].finish()
		out = append(out, *b.m[i])
	}
	return out
}

// parseStamp reads a time the store wrote, in timeLayout, by the digits'
// places (a day's buckets parse some 400,000 times), or any time sqlTime
// reads.
func parseStamp(b []byte) (time.Time, error) {
	if len(b) == len(timeLayout) && string(b[len(b)-6:]) == "+00:00" && b[4] == '-' && b[7] == '-' && b[10] == ' ' &&
		b[13] == ':' && b[16] == ':' && b[19] == '.' {
		n := func(from, to int) (v int, ok bool) {
			for _, c := range b[from:to] {
				if c < '0' || c > '9' {
					return 0, false
				}
				v = v*10 + int(c-'0')
			}
			return v, true
		}
		y, ok1 := n(0, 4)
		mo, ok2 := n(5, 7)
		d, ok3 := n(8, 10)
		h, ok4 := n(11, 13)
		mi, ok5 := n(14, 16)
		sec, ok6 := n(17, 19)
		ns, ok7 := n(20, 29)
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 {
			return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), nil
		}
	}
	var t sqlTime
	err := t.Scan(string(b))
	return t.t, err
}
