package operate

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Activity returns n buckets of width bucket from start, in order, each
// with what the store counted in it, zero where it counted nothing.
func Activity(ctx context.Context, st store.Store, start time.Time, bucket time.Duration, n int64, queue string) ([]store.ActivityRow, error) {
	out := make([]store.ActivityRow, n)
	for i := range out {
		out[i].Start = start.Add(time.Duration(i) * bucket)
	}
	rows, err := st.Activity(ctx, start, bucket, queue)
	if err != nil {
		return nil, err
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
