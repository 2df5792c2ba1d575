package queue

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestNotMigratedMapsOnlySheafsMissingTablesAndColumns(t *testing.T) {
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
		{pg("42P01", `relation "orders" does not exist`), false},
		{pg("42P01", `missing FROM-clause entry for table "sheaf_jobs"`), false},
		{pg("42703", `column "total" of relation "orders" does not exist`), false},
		{pg("22P05", `unsupported Unicode escape sequence`), false},
		{errors.New(`relation "sheaf_jobs" does not exist`), false}, // not the database's
	} {
		got := notMigrated(tc.err)
		require.Equal(t, tc.want, errors.Is(got, ErrNotMigrated), tc.err.Error())
		var pe *pgconn.PgError
		require.Equal(t, errors.As(tc.err, &pe), errors.As(got, &pe), "the database's error stays in the chain")
		if !tc.want {
			require.Same(t, tc.err, got)
		}
	}
	require.NoError(t, notMigrated(nil))
}
