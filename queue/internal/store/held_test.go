package store_test

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

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Only errors that may go away on their own are worth a retry.
func TestTransientErrors(t *testing.T) {
	t.Parallel()
	st, err := store.Open(pgtest.New(t).Gorm)
	require.NoError(t, err)
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
		{&pgconn.PgError{Code: "0A000"}, false}, // feature not supported
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined table
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation
		{&pgconn.PgError{Code: "22P05"}, false}, // bad data
		{sql.ErrNoRows, false},
		{errors.New("something else"), false},
		{&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{driver.ErrBadConn, true},
	} {
		require.Equal(t, c.want, st.Transient(errors.Join(errors.New("wrapped"), c.err)), "%v", c.err)
	}
}

// A migration that adds a column under a statement a connection has
// prepared, whose result * made, fails it once; tried again, it works.
func TestAChangedCachedPlanIsTransient(t *testing.T) {
	pgtest.PostgresOnly(t, "the cached plan is PostgreSQL's")
	t.Parallel()
	db := pgtest.New(t)
	st, err := store.Open(db.Gorm)
	require.NoError(t, err)
	sqlDB, err := db.Gorm.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // the statement prepared and run again on one connection
	require.NoError(t, db.Gorm.Exec("CREATE TABLE widened (a int)").Error)
	read := func() error { return db.Gorm.Raw("SELECT * FROM widened").Scan(&[]map[string]any{}).Error }
	require.NoError(t, read())
	require.NoError(t, db.Gorm.Exec("ALTER TABLE widened ADD COLUMN b int").Error)
	err = read()
	require.ErrorContains(t, err, "cached plan must not change result type")
	require.True(t, st.Transient(err))
	require.NoError(t, read(), "tried again")
}
