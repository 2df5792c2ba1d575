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
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

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

// A statement met by an outage is worth running again later; one that met
// a limit of its own would meet it again.
func TestUnavailableErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},  // admin shutdown: the server restarts
		{&pgconn.PgError{Code: "57P03"}, true},  // the server is starting
		{&pgconn.PgError{Code: "08006"}, true},  // connection failure
		{&pgconn.PgError{Code: "53300"}, true},  // too many connections
		{&pgconn.PgError{Code: "40P01"}, true},  // deadlock
		{&pgconn.PgError{Code: "57014"}, false}, // statement timeout, or cancelled by an operator
		{&pgconn.PgError{Code: "57P04"}, false}, // the database was dropped
		{&pgconn.PgError{Code: "55P03"}, false}, // lock timeout
		{&pgconn.PgError{Code: "08P01"}, false}, // protocol violation
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation
		{&pgconn.PgError{Code: "X"}, false},     // not a SQLSTATE
		{&pgconn.ConnectError{}, true},          // connection refused while the server is down
		{&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{&net.DNSError{Err: "no such host", Name: "db.invalid"}, false},
		{io.ErrUnexpectedEOF, true},
		{driver.ErrBadConn, true},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{sql.ErrNoRows, false},
	} {
		require.Equal(t, c.want, pgerr.Unavailable(fmt.Errorf("wrapped: %w", c.err)), "%v", c.err)
	}
}

// A runner's bookkeeping write is tried again after a timeout, as after a
// restart; never after an error about the statement itself.
func ExampleTransient() {
	timedOut := &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
	refused := &pgconn.PgError{Code: "23503", Message: "violates foreign key constraint"}
	fmt.Println(pgerr.Transient(fmt.Errorf("complete: %w", timedOut)))
	fmt.Println(pgerr.Transient(fmt.Errorf("complete: %w", refused)))
	// Output:
	// true
	// false
}

// A batch's cleanup tries its DELETE again while the server restarts, but
// not after a statement timeout, which the same DELETE would meet again.
func ExampleUnavailable() {
	restarting := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	timedOut := &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
	fmt.Println(pgerr.Unavailable(fmt.Errorf("delete: %w", restarting)))
	fmt.Println(pgerr.Unavailable(fmt.Errorf("delete: %w", timedOut)))
	// Output:
	// true
	// false
}
