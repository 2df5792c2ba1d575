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
//
// Buckets of an hour read the hour roll-ups for the hours they keep and
// made final, and the jobs for the others (the current hour among them),
// so that the series stays as it was once the jobs are pruned. Narrower
// buckets read the jobs only: an hour's roll-up cannot be split.
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
	end := start.Add(time.Duration(n) * bucket)
	rows, err := activityRows(ctx, st, start, end, bucket, queue)
	if err != nil {
		return nil, check.Failed(ctx, "activity", err)
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

// activityRows reads the buckets of [start, end): for hours, the rolled-up
// ones from the roll-ups, the ones before and after from the jobs.
func activityRows(ctx context.Context, st store.Store, start, end time.Time, bucket time.Duration, queue string) ([]store.ActivityRow, error) {
	if bucket != time.Hour {
		return st.Activity(ctx, start, end, bucket, queue)
	}
	kept, final, ok, err := st.HoursFinal(ctx)
	if err != nil {
		return nil, err
	}
	from, to := later(start, kept), earlier(end, final)
	if !ok || !from.Before(to) {
		return st.Activity(ctx, start, end, bucket, queue)
	}
	var out []store.ActivityRow
	if start.Before(from) {
		if out, err = st.Activity(ctx, start, from, bucket, queue); err != nil {
			return nil, err
		}
	}
	rolled, err := st.Hours(ctx, from, to, queue)
	if err != nil {
		return nil, err
	}
	out = append(out, rolled...)
	if to.Before(end) {
		live, err := st.Activity(ctx, to, end, bucket, queue)
		if err != nil {
			return nil, err
		}
		out = append(out, live...)
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
