package queue

// Listening: notifications of new jobs and of cancellations.

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// listen keeps a connection LISTENing for new jobs and cancellations,
// reconnecting when it breaks. Polling covers the gaps.
func (r *Runner) listen(ctx context.Context) {
	defer r.loops.Done()
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("queue: listener connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *Runner) listenOnce(ctx context.Context) error {
	conn, err := r.sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("queue: the listener needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		var schema string
		if err := pc.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return err
		}
		if _, err := pc.Exec(ctx, "LISTEN sheaf_jobs; LISTEN sheaf_cancel"); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		r.wakeFetch() // jobs may have arrived while the listener was down
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection was listening; never hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			rest, ours := strings.CutPrefix(n.Payload, schema+":")
			if !ours {
				continue // another schema's queue
			}
			switch n.Channel {
			case "sheaf_jobs":
				q, prio, suspects := parseNotice(rest)
				if !slices.Contains(r.cfg.queues, q) {
					continue
				}
				if suspects {
					r.suspects.Store(true)
				} else {
					r.noteArrival(q, prio)
				}
				r.wakeFetch()
			case "sheaf_cancel":
				if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
					r.cancelRunning(id, ErrCancelled)
				}
			}
		}
	})
}
