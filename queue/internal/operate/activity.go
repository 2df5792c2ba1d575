package operate

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Activity returns the buckets of width bucket from since, truncated to
// the bucket, to now, in order, each with what the store counted in it,
// zero where it counted nothing; none if since is to come. It refuses a
// bucket under a second, a bad queue name and more than most buckets.
func Activity(ctx context.Context, st store.Store, since time.Time, bucket time.Duration, queue string, most int64) ([]store.ActivityRow, error) {
	if bucket < time.Second {
		return nil, check.Invalid("Activity: Bucket must be at least a second, not %v", bucket)
	}
	if queue != "" {
		if err := check.QueueName("Activity", queue); err != nil {
			return nil, err
		}
	}
	start := since.Truncate(bucket)
	now := time.Now()
	if start.After(now) {
		return []store.ActivityRow{}, nil
	}
	n := int64(now.Sub(start)/bucket) + 1
	if n > most {
		return nil, check.Invalid("Activity: %d buckets of %v from %v to now; at most %d (widen Bucket or move Since)",
			n, bucket, start, most)
	}
	out := make([]store.ActivityRow, n)
	for i := range out {
		out[i].Start = start.Add(time.Duration(i) * bucket)
	}
	rows, err := st.Activity(ctx, start, bucket, queue)
	if err != nil {
		return nil, check.Failed("activity", err)
	}
	for _, r := range rows {
		i := int64(r.Start.Sub(start) / bucket)
		if i < 0 || i >= n {
			continue // finished after now by this process's clock, which lags the database's
		}
		r.Start = out[i].Start
		out[i] = r
	}
	return out, nil
}
