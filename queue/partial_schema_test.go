package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// A schema half dropped by hand (the jobs and the version table gone, the
// schedules left) fails Migrate with ErrPartialSchema, which names the
// tables left and what to do, rather than the server's "sheaf_schedules
// already exists". Doing it lets Migrate start afresh.
func TestMigrateRefusesAPartialSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	for _, table := range []string{"sheaf_migrations", "sheaf_jobs", "sheaf_attempts"} {
		require.NoError(t, e.db.Gorm.Exec("DROP TABLE "+table).Error)
	}
	err := e.client.Migrate(ctx)
	require.ErrorIs(t, err, queue.ErrPartialSchema)
	require.ErrorContains(t, err, "queue: migrate: ")
	require.ErrorContains(t, err, "no version is recorded (sheaf_migrations is missing or empty), "+
		"yet sheaf_schedules, sheaf_queues, sheaf_runners, sheaf_audit")
	require.ErrorContains(t, err, "are there: restore what was dropped from a backup, or drop sheaf_schedules, sheaf_queues, sheaf_runners, sheaf_audit")
	require.ErrorContains(t, err, "(losing the jobs they hold) and call Migrate again")

	// Later versions' tables follow these in the message; drop every one.
	left, err := e.db.Gorm.Migrator().GetTables()
	require.NoError(t, err)
	for _, table := range left {
		require.NoError(t, e.db.Gorm.Exec("DROP TABLE "+table).Error)
	}
	require.NoError(t, e.client.Migrate(ctx))
	_, err = e.client.Enqueue(ctx, noop{})
	require.NoError(t, err)
}
