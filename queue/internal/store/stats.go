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
// every finished job: the QUEUED and PROCESSING jobs where they are, the
// jobs that finished on a day whose roll-up is final from the day
// roll-ups (which outlive the pruned jobs), and those that finished since
// where they are, through the index of finished jobs by time. A finished
// job counts where it finished, so a job retried after its day was rolled
// up counts there and again as it stands now.
func CountByKind(ctx context.Context, s Store, db *gorm.DB) ([]KindCount, error) {
	k := keepingOf(s)
	var out []KindCount
	if err := db.WithContext(ctx).Raw("SELECT kind, status, count(*) AS n FROM sheaf_jobs WHERE " + activeStatuses +
		" GROUP BY kind, status").Scan(&out).Error; err != nil {
		return nil, err
	}
	final, err := k.finalBefore(ctx, db)
	if err != nil {
		return nil, err
	}
	live := "SELECT kind, status, count(*) AS n FROM sheaf_jobs WHERE " + finishedStatuses
	var args []any
	if final != "" {
		day, err := time.Parse(DayLayout, final)
		if err != nil {
			return nil, fmt.Errorf("rolled-up days: %w", err)
		}
		live += " AND completed_at >= " + k.ts
		args = append(args, k.at(day))
		var rolled []struct {
			Kind                         string
			Completed, Failed, Cancelled int64
		}
		if err := db.WithContext(ctx).Raw(`SELECT kind, sum(completed) AS completed, sum(failed) AS failed, sum(cancelled) AS cancelled
			FROM sheaf_history WHERE day < `+k.day+" GROUP BY kind", final).Scan(&rolled).Error; err != nil {
			return nil, err
		}
		for _, r := range rolled {
			for _, c := range []KindCount{{r.Kind, "COMPLETED", r.Completed}, {r.Kind, "FAILED", r.Failed}, {r.Kind, "CANCELLED", r.Cancelled}} {
				if c.N > 0 {
					out = append(out, c)
				}
			}
		}
	}
	var since []KindCount
	if err := db.WithContext(ctx).Raw(live+" GROUP BY kind, status", args...).Scan(&since).Error; err != nil {
		return nil, err
	}
	return append(out, since...), nil
}
