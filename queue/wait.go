package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Bounds of Wait's pause between looks: short at first, for jobs that
// finish in milliseconds, growing for those that take longer.
const (
	waitFirstPause = 5 * time.Millisecond
	waitMaxPause   = 250 * time.Millisecond
)

// Wait blocks until every job in ids is COMPLETED, FAILED or CANCELLED, and
// returns them in the order of ids. It returns an error wrapping
// ErrNotFound if a job does not exist, and one wrapping ctx.Err() if ctx
// ends first. A FAILED job is final for Wait, though Retry may run it again.
//
// Wait looks at the jobs' statuses in the table, every few milliseconds at
// first and every quarter of a second after a while, asking each time only
// about the jobs still running; it needs no runner in the process.
func (c *Client) Wait(ctx context.Context, ids ...int64) ([]JobRecord, error) {
	pending := make(map[int64]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	known, err := c.st.JobIDs(ctx, c.db, store.Filter{IDs: ids})
	if err != nil {
		return nil, fmt.Errorf("queue: wait: %w", err)
	}
	if len(known) < len(pending) {
		for _, id := range known {
			delete(pending, id)
		}
		for id := range pending {
			return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
		}
	}
	pause := waitFirstPause
	for {
		left := make([]int64, 0, len(pending))
		for id := range pending {
			left = append(left, id)
		}
		running, err := c.st.JobIDs(ctx, c.db, store.Filter{IDs: left, Statuses: []string{string(StatusQueued), string(StatusProcessing)}})
		if err != nil {
			return nil, fmt.Errorf("queue: wait: %w", err)
		}
		clear(pending)
		for _, id := range running {
			pending[id] = true
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("queue: wait: %d of %d jobs not finished: %w", len(pending), len(ids), ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, waitMaxPause)
	}
	var recs []JobRecord
	if err := c.st.Jobs(ctx, c.db, store.Filter{IDs: ids}, 0, &recs); err != nil {
		return nil, fmt.Errorf("queue: wait: %w", err)
	}
	byID := make(map[int64]JobRecord, len(recs))
	for _, rec := range recs {
		byID[rec.ID] = rec
	}
	out := make([]JobRecord, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}
