package queue

import (
	"context"
	"slices"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
)

// analyzeAfter is the bulk size from which EnqueueBulk refreshes the table's
// statistics. Autovacuum would too, but up to a minute later; until then the
// planner, believing the table small, may sort every queued job on each
// claim instead of walking the claim index.
const analyzeAfter = 10_000

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
	if c.tx || slices.ContainsFunc(rows, func(r newJob) bool { return r.Key != nil }) {
		// One transaction (a savepoint inside the caller's) around the
		// slices, so a failure in a late one leaves none stored.
		var n int64
		err := c.st.Tx(ctx, c.db, func(tx *gorm.DB) error {
			in := c.in(tx)
			for part := range slices.Chunk(rows, 5000) {
				res := in.inserted(ctx, part)
				n += res.Created
				if res.Err != nil {
					return res.Err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	n, err := c.st.Copy(ctx, rows)
	if err != nil {
		return 0, check.Failed("enqueue bulk", err)
	}
	if n >= analyzeAfter {
		if err := c.st.Analyze(ctx); err != nil {
			c.cfg.logger.Warn("queue: analyze after bulk enqueue failed", "err", err)
		}
	}
	return n, nil
}
