package queue

import (
	"context"
	"errors"
	"fmt"
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
	out, err := c.jobs().Wait(ctx, ErrNotFound, ids)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("queue: wait: %w", err)
	}
	return out, err
}
