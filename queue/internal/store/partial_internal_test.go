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

// Versions 16, 19 and 21 install the limited claims as functions built
// from the claim statements of this package. Once shipped a version must
// not change: a change to those statements that changes its text needs a
// new version that installs the functions again, and the shipped texts
// frozen as they were.
func TestClaimFunctionsShipped(t *testing.T) {
	t.Parallel()
	for v, want := range map[int]string{
		16: "203098b72b96e34a008d2955995b60b8402eeb4734b9461d40379024fe5c432a",
		19: "1625e1c4ae262d85be639606ae1f83e335c25257a3610852f8c3ba6d9990c860",
		21: "947e742db32117e5d5fcad9a3c26481901a8279820968c207f39466a29ec7d0c",
	} {
		sum := sha256.Sum256([]byte(migrations[v]))
		require.Equal(t, want, hex.EncodeToString(sum[:]), "schema version %d", v)
	}
}
