package operate

import (
	"context"
	"errors"
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

// Wait blocks until every job in ids is finished, asking each time only
// about the jobs still QUEUED or PROCESSING, and returns them in the order
// of ids. A job that does not exist is an error wrapping notFound.
func (j Jobs[R]) Wait(ctx context.Context, notFound error, ids []int64) ([]R, error) {
	pending := make(map[int64]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	known, err := j.Store.JobIDs(ctx, j.DB, store.Filter{IDs: ids})
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	if len(known) < len(pending) {
		for _, id := range known {
			delete(pending, id)
		}
		for id := range pending {
			return nil, fmt.Errorf("%w: %d", notFound, id)
		}
	}
	pause := waitFirstPause
	for {
		left := make([]int64, 0, len(pending))
		for id := range pending {
			left = append(left, id)
		}
		running, err := j.Store.JobIDs(ctx, j.DB, store.Filter{IDs: left, Statuses: []string{"QUEUED", "PROCESSING"}})
		if err != nil {
			return nil, interrupted(ctx, err)
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
			return nil, fmt.Errorf("%d of %d jobs not finished: %w", len(pending), len(ids), ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, waitMaxPause)
	}
	recs, err := j.Read(ctx, store.Filter{IDs: ids})
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	byID := make(map[int64]*R, len(recs))
	for i := range recs {
		byID[j.View(&recs[i]).ID] = &recs[i]
	}
	out := make([]R, len(ids))
	for i, id := range ids {
		if r := byID[id]; r != nil {
			out[i] = *r
		}
	}
	return out, nil
}

// interrupted returns err, or, if ctx ended while the statement ran, ctx's
// cause with err beside it: the driver may report a deadline that cut a
// statement short as a network timeout rather than as the context's error,
// and a caller tells the two apart with errors.Is. A deadline that has
// passed counts as ended though the context's own timer has not fired yet:
// a dial bounded by the same deadline can fail first.
func interrupted(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if d, ok := ctx.Deadline(); cause == nil && ok && !time.Now().Before(d) {
		cause = context.DeadlineExceeded
	}
	if cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}
