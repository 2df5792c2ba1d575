package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/readme"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

// The program never closes its database, as a program that exits need
// not: database/sql's goroutines outlive main.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testexit.Option(), goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionCleaner"))
}

// The README's first queue program works its three reports and prints
// them completed, on an SQLite file of its own.
func TestProgram(t *testing.T) {
	out := readme.Run(t, main)
	for _, county := range []string{"Travis", "Harris", "Dallas"} {
		require.Regexp(t, "report for "+county+` \(job \d+, attempt 1\)`, out)
	}
	require.Len(t, regexp.MustCompile(`(?m)^\d+ COMPLETED$`).FindAllString(out, -1), 3, "three jobs printed completed")
	require.FileExists(t, "jobs.db")
}
