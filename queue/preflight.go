package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// preflightTimeout bounds Start's checks: longer than a bookkeeping
// statement's bound, since this may open the pool's first connection, on a
// machine that is busy starting everything at once.
const preflightTimeout = 10 * time.Second

// preflight checks, before the runner starts anything, that the database
// answers and that its schema is the one this sheaf knows, and warns when
// the connection pool cannot serve the workers.
func preflight(ctx context.Context, c *Client, sqlDB *sql.DB, workers int, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	version, room, err := c.st.Preflight(ctx)
	switch {
	case errors.Is(notMigrated(err), ErrNotMigrated):
		return fmt.Errorf("queue: start: %w (%v)", ErrNotMigrated, err)
	case err != nil:
		return fmt.Errorf("queue: start: the database did not answer: %w", err)
	case version < SchemaVersion:
		return fmt.Errorf("queue: start: %w: the schema is at version %d, this sheaf needs %d", ErrNotMigrated, version, SchemaVersion)
	case version > SchemaVersion:
		return fmt.Errorf("queue: start: %w: the database is at version %d, this sheaf knows %d", ErrSchemaTooNew, version, SchemaVersion)
	}
	if advice := runner.PoolAdvice(sqlDB, workers, room); advice != "" {
		log.Warn("queue: the connection pool cannot serve the runner's workers well", "advice", advice)
	}
	return nil
}
