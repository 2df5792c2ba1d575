package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each migration records its own version, so a schema migrated by hand
// says where it stands.
func TestMigrationsRecordTheirVersion(t *testing.T) {
	ups := store.Migrations()
	require.Len(t, ups, store.SchemaVersion)
	for i, up := range ups {
		require.True(t, strings.HasSuffix(up, fmt.Sprintf("INSERT INTO sheaf_migrations (version) VALUES (%d);\n", i+1)), "version %d", i+1)
	}
	require.Contains(t, ups[0], "CREATE TABLE IF NOT EXISTS sheaf_migrations")
}

// Migrate reports the version it found and brings the schema to
// SchemaVersion; a second call finds it there and changes nothing.
func TestMigrateReportsWhatItFound(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	found, err := store.Migrate(ctx, db.Gorm)
	require.NoError(t, err)
	require.Zero(t, found)
	found, err = store.Migrate(ctx, db.Gorm)
	require.NoError(t, err)
	require.Equal(t, store.SchemaVersion, found)
	require.Equal(t, int64(store.SchemaVersion), db.Count(t, "SELECT count(*) FROM sheaf_migrations"))
}

// A schema newer than this code is left alone, and Migrate says what it
// found, for the caller to refuse it.
func TestMigrateLeavesANewerSchemaAlone(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	_, err := store.Migrate(ctx, db.Gorm)
	require.NoError(t, err)
	require.NoError(t, db.Gorm.Exec("INSERT INTO sheaf_migrations (version) VALUES (?)", store.SchemaVersion+1).Error)
	found, err := store.Migrate(ctx, db.Gorm)
	require.NoError(t, err)
	require.Equal(t, store.SchemaVersion+1, found)
}
