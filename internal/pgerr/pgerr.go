// Package pgerr classifies the errors of PostgreSQL statements, for the
// packages that try a statement again: the queue's store and gormbatch's
// cleanup.
package pgerr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether a statement that failed with err may succeed if
// tried again: the connection broke or timed out, the server is starting,
// stopping or overloaded, the transaction lost a serialisation race, or a
// migration changed the result of a statement the connection had prepared
// (which pgx then prepares afresh). Anything else (an error the server gave
// about the statement itself, such as a missing table, bad data or a
// violated constraint; a query that found no row; a context the caller
// cancelled) fails the same way every time.
func Transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up on it
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) == 5 {
		switch pe.Code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialisation failure, deadlock
			"53", // insufficient resources: too many connections, out of memory
			"57", // operator intervention: shutdown, cancelled statement
			"58": // system error
			return true
		}
		return pe.Code == "55P03" || // lock not available
			pe.Code == "0A000" && pe.Routine == "RevalidateCachedQuery" // "cached plan must not change result type"
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne) || errors.As(err, &ce)
}

// Unavailable reports whether a statement failed with err because the
// server could not be reached or went away (the connection broke, the
// server is shutting down, starting or full), or because its transaction
// lost a deadlock or a serialisation race. Such a statement did nothing,
// and the same statement may work later on another connection. It is
// narrower than Transient: a statement cancelled by a timeout or an
// operator, or refused a lock in time, is not Unavailable, since run
// again in full it would most likely meet the same end.
func Unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", // admin shutdown
			"57P02", // crash shutdown
			"57P03", // cannot connect now: the server is starting
			"53300", // too many connections
			"40001", // serialisation failure
			"40P01": // deadlock
			return true
		}
		return len(pe.Code) == 5 && pe.Code[:2] == "08" && pe.Code != "08P01" // a connection exception, not a protocol violation
	}
	var ce *pgconn.ConnectError
	return pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce) || isNetOp(err)
}

// isNetOp reports whether err is a failed network operation (a connection
// refused or reset), not a timeout or a failed name lookup.
func isNetOp(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
