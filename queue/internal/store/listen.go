package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
)

// Channels of the notifications runners listen to. Notifications are
// database-wide, so every payload starts with the schema ("schema:...").
const (
	JobsChannel   = "sheaf_jobs"   // jobs became due: "queue:priority" or "queue:s" (see notifyDue)
	CancelChannel = "sheaf_cancel" // a job was cancelled: its ID
)

// Listen takes a connection from db and listens on the channels until ctx
// ends or the connection breaks, calling ready once it listens and each
// with the channel and the payload, schema removed, of every notification
// for the connection's schema. The connection is never handed back to the
// pool. It needs the pgx driver.
func (s *postgres) Listen(ctx context.Context, ready func(), each func(channel, payload string)) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the listener needs the pgx driver, got %T", dc)
		}
		pc := sc.Conn()
		var schema string
		if err := pc.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return err
		}
		if _, err := pc.Exec(ctx, "LISTEN "+JobsChannel+"; LISTEN "+CancelChannel+"; LISTEN "+QueuesChannel); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection was listening; never hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			if rest, ours := strings.CutPrefix(n.Payload, schema+":"); ours {
				each(n.Channel, rest)
			}
		}
	})
}
