package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// preflightTimeout bounds Start's checks: longer than a bookkeeping
// statement's bound, since this may open the pool's first connection, on a
// machine that is busy starting everything at once.
const preflightTimeout = 10 * time.Second

// preflight checks, before the runner starts anything, that the database
// answers and that its schema is the one this sheaf knows, and returns how
// many more connections the server accepts, for the runner's advice on its
// pool (see runner.PoolAdvice).
func preflight(ctx context.Context, c *Client) (room int, err error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	version, room, err := c.st.Preflight(ctx)
	switch {
	case errors.Is(notMigrated(err), ErrNotMigrated):
		return 0, fmt.Errorf("queue: start: %w (%v)", ErrNotMigrated, err)
	case err != nil:
		return 0, fmt.Errorf("queue: start: the database did not answer: %w", err)
	case version < SchemaVersion:
		return 0, fmt.Errorf("queue: start: %w: the schema is at version %d, this sheaf needs %d", ErrNotMigrated, version, SchemaVersion)
	case version > SchemaVersion:
		return 0, fmt.Errorf("queue: start: %w: the database is at version %d, this sheaf knows %d", ErrSchemaTooNew, version, SchemaVersion)
	}
	return room, nil
}
