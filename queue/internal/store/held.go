package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgerr"
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
	conn, err := h.open(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		h.Close()
	}
	return rows, err
}

// open returns the held connection, opening one if needed.
func (h *held) open(ctx context.Context) (*sql.Conn, error) {
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
	return h.conn, nil
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
// tried again on PostgreSQL (see pgerr.Transient).
func (*postgres) Transient(err error) bool { return pgerr.Transient(err) }
