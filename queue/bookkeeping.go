package queue

// Bookkeeping: the connections, timeouts and retries of the statements a
// runner issues for itself (claims, results, renewals, rescues, requeues).

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

// Bounds of a bookkeeping statement's timeout: a fraction of the lease (see
// newTimeouts), but never so short that a busy server's ordinary claim times
// out, nor so long that a runner cut off from the database waits out one
// statement where it could have tried several.
const (
	minStatementTimeout = time.Second
	maxStatementTimeout = 10 * time.Second
	// minConnectTimeout is the least time given to opening a connection:
	// a new backend on a busy server takes a while, and a connection given
	// up on while it opens never opens. It is short, too: while the server
	// cannot be reached, each try to connect holds up the next renewal.
	minConnectTimeout = time.Second
)

// timeouts are the runner's bookkeeping bounds, derived from its lease: a
// runner must be able to try a renewal several times within one lease.
type timeouts struct {
	statement time.Duration // each bookkeeping statement
	retryMax  time.Duration // longest pause between tries
	// renew bounds a lease renewal, and renewPause the pauses between its
	// tries: short, so that a runner cut off from the database tries about
	// ten times within one lease and renews soon after it is back.
	renew, renewPause time.Duration
}

func newTimeouts(lease time.Duration) timeouts {
	return timeouts{
		statement:  min(max(lease/6, minStatementTimeout), maxStatementTimeout),
		retryMax:   max(lease/10, 50*time.Millisecond),
		renew:      min(max(lease/10, 500*time.Millisecond), maxStatementTimeout),
		renewPause: max(lease/30, 20*time.Millisecond),
	}
}

// heldConn is a connection a loop keeps for itself, so that its statements
// neither wait for the pool nor churn it: a busy runner's claims and
// completions would otherwise open and close connections all the time. It is
// dropped after an error and taken again on the next statement.
type heldConn struct {
	db   *sql.DB
	conn *sql.Conn
	// setup, if set, runs on each new connection, which is then never
	// handed back to the pool: its session settings are this loop's own.
	setup string
}

func (h *heldConn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if h.conn == nil {
		cctx, cancel := connectContext(ctx)
		c, err := h.db.Conn(cctx)
		cancel()
		if err != nil {
			return nil, err
		}
		h.conn = c
		if h.setup != "" {
			if _, err := c.ExecContext(ctx, h.setup); err != nil {
				h.close()
				return nil, err
			}
		}
	}
	rows, err := h.conn.QueryContext(ctx, query, args...)
	if err != nil {
		h.close()
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

func (h *heldConn) failed(err error) {
	if err != nil {
		h.close()
	}
}

func (h *heldConn) close() {
	if h.conn == nil {
		return
	}
	if h.setup != "" {
		// Discard the connection instead of pooling it with our settings.
		_ = h.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = h.conn.Close()
	h.conn = nil
}

// collectIDs marks in into every ID that rows return, and closes rows.
func collectIDs(rows *sql.Rows, into map[int64]bool) error {
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		into[id] = true
	}
	return rows.Err()
}

// transient reports whether a bookkeeping statement that failed with err may
// succeed if tried again: the connection broke or timed out, the server is
// starting, stopping or overloaded, or the transaction lost a serialisation
// race. Anything else (an error the server gave about the statement itself,
// such as a missing table, bad data or a violated constraint; a query that
// found no row) fails the same way every time, and is not retried.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the runner gave up on it
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
		return pe.Code == "55P03" // lock not available
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne) || errors.As(err, &ce)
}

// retry runs op, each try bounded by the statement timeout, until it
// succeeds or fails with an error that trying again cannot mend. It does not
// give up on a database that is slow or away: what it writes is work done
// (a result, a job put back), whose lease the lease keeper renews meanwhile,
// so waiting costs less than the work done again. The pauses between tries
// grow, and end once the runner is stopping out of time: from then on each
// write gets one try, and what it could not write is rescued later.
func (r *Runner) retry(op func(ctx context.Context, try int) error) error {
	var pause time.Duration
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeouts.statement)
		err := op(ctx, try)
		cancel()
		if err == nil || !transient(err) {
			return err
		}
		if try == 0 {
			r.log.Warn("queue: bookkeeping statement failed; trying again", "err", err)
		}
		pause = min(max(2*pause, 20*time.Millisecond), r.timeouts.retryMax)
		select {
		case <-time.After(pause):
		case <-r.hard:
			return err
		}
	}
}
