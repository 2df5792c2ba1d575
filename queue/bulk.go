package queue

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// analyzeAfter is the bulk size from which EnqueueBulk refreshes the table's
// statistics. Autovacuum would too, but up to a minute later; until then the
// planner, believing the table small, may sort every queued job on each
// claim instead of walking the claim index.
const analyzeAfter = 10_000

// EnqueueBulk stores many jobs with COPY, the fastest way in: use it for
// backfills and imports. Validation is as for EnqueueMany, and all jobs are
// stored or none. Jobs with idempotency keys cannot be copied (COPY cannot
// skip duplicates), so a bulk that has any goes through EnqueueMany's
// statement, in slices, instead; so does a bulk given to a Client.Tx client,
// because COPY needs a connection of its own. It returns how many jobs it
// created.
func (c *Client) EnqueueBulk(ctx context.Context, jobs []Params) (int64, error) {
	rows, err := c.prepareAll(jobs)
	if err != nil {
		return 0, err
	}
	keyed := false
	for _, r := range rows {
		keyed = keyed || r.key != nil
	}
	if keyed || c.tx {
		// One transaction (a savepoint inside the caller's) around the
		// slices, so a failure in a late one leaves none stored.
		var n int64
		err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			in := c.Tx(tx)
			for start := 0; start < len(rows); start += 5000 {
				out, err := in.insert(ctx, rows[start:min(start+5000, len(rows))])
				if err != nil {
					return err
				}
				for _, o := range out {
					if !o.Duplicate {
						n++
					}
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	n, err := c.copyJobs(ctx, rows)
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue bulk: %w", notMigrated(err))
	}
	if n >= analyzeAfter {
		if err := c.db.WithContext(ctx).Exec("ANALYZE sheaf_jobs").Error; err != nil {
			c.cfg.logger.Warn("queue: analyze after bulk enqueue failed", "err", err)
		}
	}
	return n, nil
}

var copyColumns = []string{"kind", "queue", "priority", "payload", "correlation_id", "max_attempts", "backoff", "run_at", "auth", "run_id", "period"}

func (c *Client) copyJobs(ctx context.Context, rows []newJob) (int64, error) {
	sqlDB, err := c.db.DB()
	if err != nil {
		return 0, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var n int64
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		err := pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
			var now time.Time // the database's clock, for RunAt-less and delayed jobs
			if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
				return err
			}
			due := map[string]int{} // queue → highest due priority
			src := pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				runAt := now.Add(r.delay)
				if r.runAt != nil {
					runAt = *r.runAt
				}
				if !runAt.After(now) {
					due[r.queue] = max(due[r.queue], r.priority)
				}
				return []any{r.kind, r.queue, int16(r.priority), json.RawMessage(r.payload), r.correlation,
					int32(r.attempts), jsonOrNil(r.backoff), runAt, jsonOrNil(r.auth), r.runID, r.period}, nil
			})
			var err error
			if n, err = tx.CopyFrom(ctx, pgx.Identifier{jobsTable}, copyColumns, src); err != nil {
				return err
			}
			for q, top := range due {
				if _, err := tx.Exec(ctx, "SELECT pg_notify('sheaf_jobs', current_schema() || ':' || $1)", fmt.Sprintf("%s:%d", q, top)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && ctx.Err() != nil {
			// A cancelled COPY can leave the connection mid-protocol.
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
	return n, err
}

func jsonOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}
