package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// TestRunOnSQLite runs the program on a new SQLite file: both notices
// arrive, signed, for the failure and for the retry (run fails
// otherwise), and the folder is gone at the end.
func TestRunOnSQLite(t *testing.T) {
	exampledb.NoLeftovers(t)
	if err := run(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
}
