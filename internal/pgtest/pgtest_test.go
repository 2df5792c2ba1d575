package pgtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := pgtest.New(t), pgtest.New(t)
	require.NotEqual(t, a.Schema, b.Schema)
	require.NoError(t, a.Gorm.Exec("CREATE TABLE items (id int)").Error)
	require.NoError(t, a.Gorm.Exec("INSERT INTO items VALUES (1), (2)").Error)
	require.Equal(t, int64(2), a.Count(t, "SELECT count(*) FROM items"))
	require.Error(t, b.Gorm.Exec("SELECT * FROM items").Error, "b does not see a's table")

	var schema string
	require.NoError(t, a.SQL.QueryRow("SELECT current_schema()").Scan(&schema))
	require.Equal(t, a.Schema, schema)
}

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	dsn, err := pgtest.WithSearchPath("postgres://u:p@h:5432/db?sslmode=disable", "s1")
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@h:5432/db?search_path=s1&sslmode=disable", dsn)
	_, err = pgtest.WithSearchPath("host=h dbname=db", "s1")
	require.ErrorContains(t, err, "must be a postgres:// URL")
}

func TestCountTakesBothPlaceholderStyles(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	require.Equal(t, int64(3), db.Count(t, "SELECT count(*) FROM generate_series(1, $1)", 3))
	require.Equal(t, int64(4), db.Count(t, "SELECT count(*) FROM generate_series(1, ?)", 4))
}
