package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// minConnectTimeout is the least time given to opening a connection: a new
// backend on a busy server takes a while, and a connection given up on
// while it opens never opens. It is short, too: while the server cannot be
// reached, each try to connect holds up the next renewal.
const minConnectTimeout = time.Second

// held is PostgreSQL's Conn: a connection a runner's loop keeps for itself, so that its
// statements neither wait for the pool nor churn it: a busy runner's claims
// and completions would otherwise open and close connections all the time.
// It is dropped after an error and taken again on the next statement. A
// held is used by one goroutine at a time.
type held struct {
	db   *sql.DB
	conn *sql.Conn
	// async, if set, makes the connection's commits not wait for the WAL
	// to reach disk; such a connection is never handed back to the pool.
	async bool
}

// Hold returns a held connection. With asyncCommit, its transactions
// commit without waiting for the disk: for claims, whose loss in a server
// crash only uncounts an attempt.
func (s *postgres) Hold(asyncCommit bool) Conn { return &held{db: s.db, async: asyncCommit} }

// query runs query on the held connection, opening one if needed.
func (h *held) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if h.conn == nil {
		cctx, cancel := connectContext(ctx)
		c, err := h.db.Conn(cctx)
		cancel()
		if err != nil {
			return nil, err
		}
		h.conn = c
		if h.async {
			if _, err := c.ExecContext(ctx, "SET synchronous_commit = off"); err != nil {
				h.Close()
				return nil, err
			}
		}
	}
	rows, err := h.conn.QueryContext(ctx, query, args...)
	if err != nil {
		h.Close()
	}
	return rows, err
}

// connectContext bounds opening a connection by ctx's deadline, which is a
// statement's, or minConnectTimeout if that is later; it is cancelled with
// ctx when ctx is cancelled rather than timed out.
func connectContext(ctx context.Context) (context.Context, context.CancelFunc) {
	bound := minConnectTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = max(time.Until(d), minConnectTimeout)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	return cctx, func() { stop(); cancel() }
}

// DropOn drops the connection if err is not nil: after an error its state
// is not known.
func (h *held) DropOn(err error) {
	if err != nil {
		h.Close()
	}
}

// Close gives the connection back, or discards it if its session settings
// are the loop's own.
func (h *held) Close() {
	if h.conn == nil {
		return
	}
	if h.async {
		_ = h.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = h.conn.Close()
	h.conn = nil
}

// ids runs query on the held connection and returns the IDs it yields.
func (h *held) ids(ctx context.Context, query string, args ...any) (_ []int64, err error) {
	rows, err := h.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { h.DropOn(err) }()
	return scanIDs(rows)
}

// scanIDs reads the one-column rows of IDs and closes rows.
func scanIDs(rows *sql.Rows) ([]int64, error) { return scanColumn[int64](rows) }

// scanColumn reads one-column rows and closes rows.
func scanColumn[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Transient reports whether a statement that failed with err may succeed if
// tried again on PostgreSQL: the connection broke or timed out, the server
// is starting, stopping or overloaded, the transaction lost a
// serialisation race, or a migration changed the result of a statement
// the connection had prepared (which pgx then prepares afresh).
// Anything else (an error the server gave about the statement itself, such
// as a missing table, bad data or a violated constraint; a query that found
// no row) fails the same way every time.
func (*postgres) Transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up on it
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
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
