package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// TestRunOnSQLite runs the program on a new SQLite file and kfake: every
// job's final event arrives, and the malformed request is dead-lettered
// (run fails otherwise, within its minute).
func TestRunOnSQLite(t *testing.T) {
	exampledb.NoLeftovers(t)
	if err := run(t.Context(), "", "", os.Stderr); err != nil {
		t.Fatal(err)
	}
}
