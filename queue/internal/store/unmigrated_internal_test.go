package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// A missing table or column of sheaf's is a missing migration, as either
// database says it; somebody else's, or a statement's own bug, is not.
func TestUnmigrated(t *testing.T) {
	t.Parallel()
	pg := func(code, msg string) error {
		return fmt.Errorf("queue: enqueue: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{pg("42P01", `relation "sheaf_jobs" does not exist`), true},
		{pg("42P01", `relation "app.sheaf_schedules" does not exist`), true},
		{pg("42703", `column "period" does not exist`), true},
		{pg("42703", `column "period" of relation "sheaf_jobs" does not exist`), true},
		{pg("42703", `column j.period does not exist`), true},
		{pg("22P05", `unsupported Unicode escape sequence`), false},
		{errors.New(`relation "sheaf_jobs" does not exist`), false}, // not the database's
		{pg("42703", `column "total" of relation "orders" does not exist`), false},
		{pg("42P01", `relation "orders" does not exist`), false},
		{pg("42P01", `missing FROM-clause entry for table "sheaf_jobs"`), false},
		{pg("23505", `duplicate key value violates unique constraint "sheaf_jobs_pkey"`), false},
		{errors.New("SQL logic error: no such table: sheaf_attempts (1)"), true},
		{errors.New("SQL logic error: no such table: main.sheaf_runners (1)"), true},
		{errors.New("SQL logic error: no such table: orders (1)"), false},
		{errors.New("SQL logic error: no such column: period (1)"), true},
		{errors.New("SQL logic error: table sheaf_jobs has no column named period (1)"), true},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, Unmigrated(tc.err), "%v", tc.err)
	}
}
