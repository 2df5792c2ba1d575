package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
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

// Migrate is Client.Migrate: it brings the schema to store.SchemaVersion,
// refusing a newer one with an error wrapping tooNew, and warns on log
// when it upgraded the schema under runners that are up: they run an
// earlier release, since this one's refuse to start on an older schema. A
// failed read of the runners goes unsaid: the migration it would warn of
// is done.
func Migrate(ctx context.Context, st store.Store, log *slog.Logger, tooNew error) error {
	found, err := st.Migrate(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("queue: migrate: %w", err)
	case found > store.SchemaVersion:
		return fmt.Errorf("%w: database is at version %d, this sheaf knows %d", tooNew, found, store.SchemaVersion)
	case found == 0 || found == store.SchemaVersion:
		return nil
	}
	up, err := st.Runners(ctx, time.Minute)
	if err != nil || len(up) == 0 {
		return nil
	}
	ids := make([]string, len(up))
	for i, r := range up {
		ids[i] = r.ID
	}
	log.Warn("queue: migrating the schema under runners of an earlier release; replace them once it is done "+
		"(those of schema version 6 should be stopped first)", "from", found, "to", store.SchemaVersion, "runners", ids)
	return nil
}

// CheckPool refuses a pool on db that allows fewer connections than a
// runner needs.
func CheckPool(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("queue: new runner: %w", err)
	}
	if most := sqlDB.Stats().MaxOpenConnections; most > 0 && most < Conns {
		return check.Invalid("the connection pool allows %d connections; a runner needs at least %d (listener, claims, completions, leases) plus what its handlers use", most, Conns)
	}
	return nil
}

// Version is Client.SchemaVersion: the schema's version, 0 if it was never
// migrated.
func Version(ctx context.Context, st store.Store) (int, error) {
	v, err := st.Version(ctx)
	if store.Unmigrated(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue: schema version: %w", err)
	}
	return v, nil
}

// Ping is Client.Ping: it checks that the database on db answers, and
// returns how long it took.
func Ping(ctx context.Context, db *gorm.DB) (time.Duration, error) {
	sqlDB, err := db.DB()
	if err == nil {
		start := time.Now()
		if err = sqlDB.PingContext(ctx); err == nil {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("queue: ping: %w", err)
}
