package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestTransientErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{&pgconn.PgError{Code: "08006"}, true},  // connection failure
		{&pgconn.PgError{Code: "40001"}, true},  // serialization failure
		{&pgconn.PgError{Code: "40P01"}, true},  // deadlock
		{&pgconn.PgError{Code: "53300"}, true},  // too many connections
		{&pgconn.PgError{Code: "57P01"}, true},  // admin shutdown
		{&pgconn.PgError{Code: "55P03"}, true},  // lock not available
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined table
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation
		{&pgconn.PgError{Code: "22P05"}, false}, // bad data
		{sql.ErrNoRows, false},
		{errors.New("something else"), false},
		{&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{driver.ErrBadConn, true},
	} {
		require.Equal(t, c.want, transient(errors.Join(errors.New("wrapped"), c.err)), "%v", c.err)
	}
}

func TestPoolAdvice(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none") // never connects
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	advice := poolAdvice(db, 100, 50)
	require.Contains(t, advice, "no limit on open connections")
	require.Contains(t, advice, "the server accepts 50 more")
	require.Contains(t, advice, "SetMaxIdleConns(50)")

	db.SetMaxOpenConns(40)
	advice = poolAdvice(db, 100, 50)
	require.NotContains(t, advice, "no limit")
	require.Contains(t, advice, "SetMaxIdleConns(40)")

	db.SetMaxIdleConns(40)
	require.Empty(t, poolAdvice(db, 100, 50))
	n, known := maxIdleConns(db)
	require.True(t, known)
	require.Equal(t, 40, n)
}
