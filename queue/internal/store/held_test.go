package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A migration that adds a column under a statement a connection has
// prepared, whose result * made, fails it once; tried again, it works.
func TestAChangedCachedPlanIsTransient(t *testing.T) {
	pgtest.PostgresOnly(t, "the cached plan is PostgreSQL's")
	t.Parallel()
	db := pgtest.New(t)
	st, err := store.Open(db.Gorm)
	require.NoError(t, err)
	sqlDB, err := db.Gorm.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // the statement prepared and run again on one connection
	require.NoError(t, db.Gorm.Exec("CREATE TABLE widened (a int)").Error)
	read := func() error { return db.Gorm.Raw("SELECT * FROM widened").Scan(&[]map[string]any{}).Error }
	require.NoError(t, read())
	require.NoError(t, db.Gorm.Exec("ALTER TABLE widened ADD COLUMN b int").Error)
	err = read()
	require.ErrorContains(t, err, "cached plan must not change result type")
	require.True(t, st.Transient(err))
	require.NoError(t, read(), "tried again")
}
