package queue

import (
	"context"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/enqueue"
)

// EnqueueBulk stores many jobs with COPY (on SQLite, prepared multi-row
// INSERTs), the fastest way in: use it for backfills and imports.
// Validation is as for EnqueueMany, and all jobs are stored or none. Jobs
// with idempotency keys cannot be copied (COPY cannot skip duplicates), so a
// bulk that has any goes through EnqueueMany's statement, in slices,
// instead; so does a bulk given to a Client.Tx client, because COPY needs a
// connection of its own. It returns how many jobs it created.
func (c *ops) EnqueueBulk(ctx context.Context, jobs []Params) (int64, error) {
	rows, err := c.prepareAll(jobs)
	if err != nil {
		return 0, err
	}
	if len(c.cfg.hooks) == 0 {
		return c.enqueueBulk(ctx, rows)
	}
	res := c.hooked(ctx, opEnqueueBulk, rows, func(ctx context.Context) EnqueueResult {
		n, err := c.enqueueBulk(ctx, rows)
		return EnqueueResult{Created: n, Err: err}
	})
	return res.Created, res.Err
}

func (c *ops) enqueueBulk(ctx context.Context, rows []newJob) (int64, error) {
	return enqueue.Bulk(ctx, c.st, c.db, rows, c.tx, c.cfg.logger, func(tx *gorm.DB, part []newJob) (int64, error) {
		in := c.in(tx)
		res := in.inserted(ctx, part)
		return res.Created, res.Err
	})
}
