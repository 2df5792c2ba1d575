package exampledb

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestSQLiteFolderIsRemovedOnClose(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := Open(t.Context(), "sheaf_example_test", "", 2)
	require.NoError(t, err)
	require.Equal(t, "sheaf.db", d.Where)
	require.NoError(t, d.Exec("CREATE TABLE t (x INTEGER)").Error)
	require.DirExists(t, d.dir)
	require.NoError(t, d.Close())
	require.NoDirExists(t, d.dir)
	left, err := os.ReadDir(os.Getenv("TMPDIR"))
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestNotAPostgresURLIsRefused(t *testing.T) {
	_, err := Open(t.Context(), "sheaf_example_test", "mysql://root@localhost/test", 2)
	require.ErrorContains(t, err, "must be a postgres:// URL")
}
