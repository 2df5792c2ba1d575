package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Both stores' migrations create the same tables at every version, those
// Migrate checks a schema against.
func TestBothStoresCreateTheSameTables(t *testing.T) {
	t.Parallel()
	pg, lite := pgMigrations(), (*sqlite)(nil).Migrations()
	for v := 0; v <= SchemaVersion; v++ {
		require.Equal(t, tables(pg, v), tables(lite, v), "version %d", v)
	}
	require.Equal(t, []string{"sheaf_migrations", "sheaf_jobs", "sheaf_schedules", "sheaf_queues", "sheaf_attempts", "sheaf_runners", "sheaf_audit",
		"sheaf_leader", "sheaf_history", "sheaf_rollup",
		"sheaf_alert_episodes", "sheaf_alert_notices", "sheaf_alert_silences", "sheaf_ticks", "sheaf_runs", "sheaf_outbox", "sheaf_limits", "sheaf_limit_starts",
		"sheaf_hours", "sheaf_hours_final"}, tables(pg, SchemaVersion))
	require.Equal(t, []string{"sheaf_migrations", "sheaf_jobs", "sheaf_schedules"}, tables(pg, 2))
}
