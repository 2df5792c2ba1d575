package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Table names.
const jobsTable = store.JobsTable

// SchemaVersion is the schema version this release of sheaf migrates to.
const SchemaVersion = store.SchemaVersion

// Migration is the SQL that brings a schema from Version-1 to Version. Up
// records the version in the sheaf_migrations table too, which Runner.Start
// reads; version 1 creates that table.
type Migration struct {
	Version int
	Up      string
}

// Migrations returns, in order, the SQL of every schema version this sheaf
// knows, for the client's database: for teams that apply schema changes
// with their own tool (goose, golang-migrate, atlas) instead of Migrate.
// Applying them in order, each in a transaction, gives the schema Migrate
// gives. They only go forward; a way back is the team's to write.
func (c *Client) Migrations() []Migration {
	ups := c.st.Migrations()
	out := make([]Migration, len(ups))
	for i, up := range ups {
		out[i] = Migration{Version: i + 1, Up: up}
	}
	return out
}

func (c *Client) migrate(ctx context.Context) error {
	found, err := c.st.Migrate(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("queue: migrate: %w", err)
	case found > SchemaVersion:
		return fmt.Errorf("%w: database is at version %d, this sheaf knows %d", ErrSchemaTooNew, found, SchemaVersion)
	case found > 0 && found < SchemaVersion:
		c.warnOfOlderRunners(ctx, found)
	}
	return nil
}

// warnOfOlderRunners logs a warning when Migrate has upgraded the schema
// from version under runners that are up: they run an earlier release,
// since this one's refuse to start on an older schema. A failed read of
// the runners goes unsaid: the migration it would warn of is done.
func (c *Client) warnOfOlderRunners(ctx context.Context, version int) {
	up, err := c.st.Runners(ctx, time.Minute)
	if err != nil || len(up) == 0 {
		return
	}
	ids := converted(up, func(r store.RunnerRow) string { return r.ID })
	c.cfg.logger.Warn("queue: migrating the schema under runners of an earlier release; replace them once it is done "+
		"(those of schema version 6 should be stopped first)", "from", version, "to", SchemaVersion, "runners", ids)
}
