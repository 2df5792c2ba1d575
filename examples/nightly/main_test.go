// SQLite is C translated to Go, and the race detector slows it some
// twentyfold: under -race, this run takes most of a minute rather than
// seconds, so it is left out there.

//go:build !race

package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// TestRunOnSQLite runs the program on its default database, a new SQLite
// file in a temporary folder, at its default speed: the night goes as
// planned (run checks it), and the folder is gone at the end.
func TestRunOnSQLite(t *testing.T) {
	exampledb.NoLeftovers(t)
	if err := run(t.Context(), "", 60); err != nil {
		t.Fatal(err)
	}
}
