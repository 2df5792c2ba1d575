package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// TestRunOnSQLite runs the program on its default database and archive
// folder: every pruned job is in the archive (run checks it), and both
// temporary folders are gone at the end.
func TestRunOnSQLite(t *testing.T) {
	exampledb.NoLeftovers(t)
	if err := run(t.Context(), "", ""); err != nil {
		t.Fatal(err)
	}
}
