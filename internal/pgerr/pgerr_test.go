package pgerr_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Only errors that may go away on their own are worth a retry.
func TestTransientErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{&pgconn.PgError{Code: "08006"}, true},                                   // connection failure
		{&pgconn.PgError{Code: "40001"}, true},                                   // serialization failure
		{&pgconn.PgError{Code: "40P01"}, true},                                   // deadlock
		{&pgconn.PgError{Code: "53300"}, true},                                   // too many connections
		{&pgconn.PgError{Code: "57P01"}, true},                                   // admin shutdown
		{&pgconn.PgError{Code: "55P03"}, true},                                   // lock not available
		{&pgconn.PgError{Code: "0A000"}, false},                                  // feature not supported
		{&pgconn.PgError{Code: "0A000", Routine: "RevalidateCachedQuery"}, true}, // a prepared statement's result changed
		{&pgconn.PgError{Code: "42P01"}, false},                                  // undefined table
		{&pgconn.PgError{Code: "23505"}, false},                                  // unique violation
		{&pgconn.PgError{Code: "22P05"}, false},                                  // bad data
		{sql.ErrNoRows, false},
		{errors.New("something else"), false},
		{&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{driver.ErrBadConn, true},
	} {
		require.Equal(t, c.want, pgerr.Transient(errors.Join(errors.New("wrapped"), c.err)), "%v", c.err)
	}
}

// A cleanup tries its DELETE again while the server restarts, and gives up
// at once on an error that says what is wrong with the statement.
func ExampleTransient() {
	restarting := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	refused := &pgconn.PgError{Code: "23503", Message: "violates foreign key constraint"}
	fmt.Println(pgerr.Transient(fmt.Errorf("delete: %w", restarting)))
	fmt.Println(pgerr.Transient(fmt.Errorf("delete: %w", refused)))
	// Output:
	// true
	// false
}
