package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// preflightTimeout bounds Start's checks: longer than a bookkeeping
// statement's bound, since this may open the pool's first connection, on a
// machine that is busy starting everything at once.
const preflightTimeout = 10 * time.Second

// Preflight is the usual Config.Preflight: it checks that the database
// answers and that its schema is store.SchemaVersion, and returns how many
// more connections the server accepts, for the runner's advice on its pool
// (see PoolAdvice). An older or missing schema is an error wrapping
// notMigrated, a newer one tooNew.
func Preflight(ctx context.Context, st store.Store, notMigrated, tooNew error) (room int, err error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	version, room, err := st.Preflight(ctx)
	if err != nil && !store.Unmigrated(err) && ctx.Err() == nil {
		// Once more: the pool's connection may have been a stale one,
		// and a server that is down fails the second try as fast.
		version, room, err = st.Preflight(ctx)
	}
	switch {
	case store.Unmigrated(err):
		return 0, fmt.Errorf("queue: start: %w (%v)", notMigrated, err)
	case err != nil:
		return 0, fmt.Errorf("queue: start: the database did not answer: %w", err)
	case version < store.SchemaVersion:
		return 0, fmt.Errorf("queue: start: %w: the schema is at version %d, this sheaf needs %d", notMigrated, version, store.SchemaVersion)
	case version > store.SchemaVersion:
		return 0, fmt.Errorf("queue: start: %w: the database is at version %d, this sheaf knows %d", tooNew, version, store.SchemaVersion)
	}
	return room, nil
}
