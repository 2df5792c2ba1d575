package sqlitedb_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cgoSQLite is the cgo SQLite driver: a program that imports it compiles
// SQLite's C source with a C compiler, minutes on a small machine, and
// links a second SQLite beside modernc.org/sqlite's.
const cgoSQLite = "github.com/mattn/go-sqlite3"

// No package of the module, tests included, depends on the cgo driver, and
// go.mod does not require it: SQLite is pure Go throughout.
func TestNoCgoSQLite(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/sheaf-dev/sheaf/...").Output()
	require.NoError(t, err, "go list: %s", stderr(err))
	for pkg := range strings.SplitSeq(string(out), "\n") {
		require.False(t, pkg == cgoSQLite || strings.HasPrefix(pkg, cgoSQLite+"/"), "a package of the module depends on %s", pkg)
	}
	require.Contains(t, string(out), "modernc.org/sqlite\n", "the listing holds the SQLite the module does use")

	out, err = exec.Command("go", "mod", "edit", "-json").Output()
	require.NoError(t, err, "go mod edit: %s", stderr(err))
	var mod struct{ Require []struct{ Path string } }
	require.NoError(t, json.Unmarshal(out, &mod))
	require.NotEmpty(t, mod.Require)
	for _, r := range mod.Require {
		require.NotEqual(t, cgoSQLite, r.Path, "go.mod requires the cgo SQLite driver")
	}
}

// stderr is what a failed go command said.
func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
