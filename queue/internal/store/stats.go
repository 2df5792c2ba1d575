package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// queuedStatus selects the QUEUED jobs in the words of the partial indexes
// that hold only them, sheaf_jobs_claim and sheaf_jobs_suspect: neither
// database sees that status = 'QUEUED' alone may use them, and reads the
// table instead. activeStatuses adds the PROCESSING jobs, through
// sheaf_jobs_lease (only PROCESSING jobs hold a lease).
const (
	queuedStatus   = "((status = 'QUEUED' AND rescues = 0) OR (status = 'QUEUED' AND rescues > 0))"
	activeStatuses = "(" + queuedStatus + " OR (locked_until IS NOT NULL AND status = 'PROCESSING'))"
)

// CountByKind counts the jobs by kind and status on db without reading
// every finished job once the day roll-ups are final for some days (see
// counted).
func CountByKind(ctx context.Context, s Store, db *gorm.DB) ([]KindCount, error) {
	return counted(ctx, s, db, "kind", func(active bool) (out []KindCount, err error) {
		err = db.WithContext(ctx).Raw("SELECT kind, status, count(*) AS n FROM sheaf_jobs WHERE " + statusesIn(active) +
			" GROUP BY kind, status").Scan(&out).Error
		return out, err
	}, func(c groupCount) KindCount { return KindCount{Kind: c.Name, Status: c.Status, N: c.N} })
}

// CountByQueue counts the jobs by queue and status on db as CountByKind
// does by kind, with how long each queue's longest-waiting due job has
// waited.
func CountByQueue(ctx context.Context, s Store, db *gorm.DB) ([]QueueCount, error) {
	return counted(ctx, s, db, "queue", func(active bool) ([]QueueCount, error) {
		return s.QueueCounts(ctx, db, active)
	}, func(c groupCount) QueueCount { return QueueCount{Queue: c.Name, Status: c.Status, N: c.N} })
}

// counted counts the jobs by col (kind or queue) and status: once a day
// roll-up is final, read counts the QUEUED and PROCESSING jobs where they
// are and finishedBy the finished ones, each made a T by count; before
// that, read counts every status in one read of the table.
func counted[T any](ctx context.Context, s Store, db *gorm.DB, col string,
	read func(active bool) ([]T, error), count func(groupCount) T) ([]T, error) {
	k := keepingOf(s)
	final, err := k.finalBefore(ctx, db)
	if err != nil {
		return nil, err
	}
	out, err := read(final != "")
	if err != nil || final == "" {
		return out, err
	}
	finished, err := finishedBy(ctx, k, db, col, final)
	for _, c := range finished {
		out = append(out, count(c))
	}
	return out, err
}

// statusesIn selects the QUEUED and PROCESSING jobs if active, every job
// otherwise.
func statusesIn(active bool) string {
	if active {
		return activeStatuses
	}
	return "true"
}

// groupCount is a count of finished jobs of a group (a kind, a queue) and
// status.
type groupCount struct {
	Name, Status string
	N            int64
}

// finishedBy counts the finished jobs by col (kind or queue) and status
// when the roll-ups are final before day final: those that finished
// before it from the day roll-ups (which outlive the pruned jobs), those
// that finished in the final hours since from the hour roll-ups, and
// only those that finished since the last final hour where they are,
// through the index of finished jobs by time. A finished job counts where
// it finished, so a job retried after its day or hour was rolled up
// counts there and again as it stands now. The counts of a group and
// status may come in several parts.
func finishedBy(ctx context.Context, k keeping, db *gorm.DB, col, final string) ([]groupCount, error) {
	day, err := time.Parse(DayLayout, final)
	if err != nil {
		return nil, fmt.Errorf("rolled-up days: %w", err)
	}
	var out []groupCount
	add := func(rolled []rolledCount) {
		for _, r := range rolled {
			for _, c := range []groupCount{{r.Name, "COMPLETED", r.Completed}, {r.Name, "FAILED", r.Failed}, {r.Name, "CANCELLED", r.Cancelled}} {
				if c.N > 0 {
					out = append(out, c)
				}
			}
		}
	}
	var rolled []rolledCount
	if err := db.WithContext(ctx).Raw(`SELECT `+col+` AS name, sum(completed) AS completed, sum(failed) AS failed,
		sum(cancelled) AS cancelled FROM sheaf_history WHERE day < `+k.day+" GROUP BY "+col, final).Scan(&rolled).Error; err != nil {
		return nil, err
	}
	add(rolled)
	since := day
	from, before, ok, err := hoursFinal(ctx, db)
	if err != nil {
		return nil, err
	}
	if ok && !from.After(day) && before.After(day) {
		// An hour's rows are by kind and queue, by queue (kind ''), and in
		// all (both ''): each group's are read once.
		rows := "kind <> ''"
		if col == "queue" {
			rows = "kind = '' AND queue <> ''"
		}
		rolled = nil
		if err := db.WithContext(ctx).Raw(`SELECT `+col+` AS name, sum(completed) AS completed, sum(failed) AS failed,
			sum(cancelled) AS cancelled FROM sheaf_hours WHERE `+rows+` AND hour >= `+k.ts+` AND hour < `+k.ts+" GROUP BY "+col,
			k.at(day), k.at(before)).Scan(&rolled).Error; err != nil {
			return nil, err
		}
		add(rolled)
		since = before
	}
	var left []groupCount
	if err := db.WithContext(ctx).Raw("SELECT j."+col+" AS name, j.status, count(*) AS n FROM sheaf_jobs j WHERE "+k.isFinished("j")+
		" AND j.completed_at >= "+k.ts+" GROUP BY j."+col+", j.status", k.at(since)).Scan(&left).Error; err != nil {
		return nil, err
	}
	return append(out, left...), nil
}

// rolledCount is a group's finished jobs as a roll-up counts them.
type rolledCount struct {
	Name                         string
	Completed, Failed, Cancelled int64
}
