package queue

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// MaxActivityBuckets caps the buckets one Activity call returns: a day of
// minutes. Ask for a longer span with wider buckets.
const MaxActivityBuckets = 1440

// ActivityQuery selects the series Activity returns.
type ActivityQuery struct {
	// Since is where the series starts: its first bucket starts at Since
	// truncated to Bucket (Time.Truncate: whole minutes, hours, UTC days).
	Since time.Time
	// Bucket is each bucket's width, at least a second: time.Minute for
	// the last hour, 15*time.Minute for the last day. From Since to now
	// there may be at most MaxActivityBuckets buckets.
	Bucket time.Duration
	// Queue, if not empty, selects that queue's jobs; empty selects all.
	Queue string
}

// ActivityBucket is one bucket of the series: the jobs that finished in
// [Start, Start+Bucket).
type ActivityBucket struct {
	Start time.Time
	// Completed and Failed count the jobs that finished COMPLETED and
	// FAILED (for good: an attempt that is retried is not counted) in the
	// bucket.
	Completed, Failed int64
	// WaitP50 and WaitP95 are the median and 95th percentile of the queue
	// wait of the jobs counted: from when the job's last attempt became due
	// (JobRecord.RunAt: after a retry's backoff, a Retry or a rescue; for a
	// job scheduled for later, when it came due, not when it was enqueued)
	// to when it started. Zero if no job counted.
	WaitP50, WaitP95 time.Duration
	// RunP50 and RunP95 are the median and 95th percentile of the run time
	// of the jobs counted, from the start of their last attempt to their
	// finish. Jobs that failed without starting (rescued from a runner
	// before they started) count in Failed, not in the percentiles.
	RunP50, RunP95 time.Duration
}

// Activity returns the throughput and latency of finished jobs in buckets
// of q.Bucket, from q.Since to now (by this process's clock): every bucket,
// in order, those without finished jobs zero; none if Since is in the
// future. Percentiles are interpolated between the two nearest jobs, as
// PostgreSQL's percentile_cont.
//
// The series reads the jobs as they are now: a failed job that Retry
// requeued has left its bucket, cancelled jobs are not counted, and neither
// are jobs that failed before an upgrade from schema version 3 or older
// (failed jobs are found through the attempt history, begun in version 4).
//
// A call costs in proportion to the jobs that finished in the span (read
// through the index of completion times), plus a scan of the attempt
// history. On a
// table of a million jobs over a week (BenchmarkActivity, two shared cores),
// the last hour in minutes takes some 25 ms on PostgreSQL and 90 ms on
// SQLite, the last day in quarter hours (150,000 jobs) some 200 to 300 ms
// on PostgreSQL and 2 s on SQLite: a dashboard should cache the series.
//
// A query without a positive Bucket of at least a second, or with more than
// MaxActivityBuckets buckets, returns an error wrapping ErrInvalidOption.
func (c *Client) Activity(ctx context.Context, q ActivityQuery) ([]ActivityBucket, error) {
	rows, err := operate.Activity(ctx, c.st, q.Since, q.Bucket, q.Queue, MaxActivityBuckets)
	return converted(rows, func(r store.ActivityRow) ActivityBucket {
		return ActivityBucket{Start: r.Start, Completed: r.Completed, Failed: r.Failed,
			WaitP50: r.WaitP50, WaitP95: r.WaitP95, RunP50: r.RunP50, RunP95: r.RunP95}
	}), err
}
