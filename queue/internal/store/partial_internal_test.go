package store

import (
	"crypto/sha256"
	"encoding/hex"
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
		"sheaf_hours", "sheaf_hours_final", "sheaf_limit_weights"}, tables(pg, SchemaVersion))
	require.Equal(t, []string{"sheaf_migrations", "sheaf_jobs", "sheaf_schedules"}, tables(pg, 2))
}

// Version 16 installs the limited claims as functions built from the claim
// statements of this package. Once shipped it must not change: a change to
// those statements that changes this text needs a new version that
// installs the functions again, and the version 16 text frozen as it was.
func TestClaimFunctionsShipped(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(migrations[16]))
	require.Equal(t, claimFunctionsSHA256, hex.EncodeToString(sum[:]))
}

const claimFunctionsSHA256 = "203098b72b96e34a008d2955995b60b8402eeb4734b9461d40379024fe5c432a"
