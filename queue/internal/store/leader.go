package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Leadership: one runner at a time leads the maintenance, the upkeep that
// must run once however many runners there are (see package maintain). It
// holds the row named leadership in sheaf_leader until expires_at, and
// renews it well before then; another runner takes the row only once it
// has expired. On PostgreSQL the server's clock sets and judges expiry, so
// the runners' clocks do not matter; on SQLite, the processes on a file
// share the machine's clock, and the write lock serialises the elections.

// leadership names the maintenance's row in sheaf_leader.
const leadership = "maintenance"

// LeadResult is what Lead found: whether holder leads, and, if another
// runner does, how long its lease has left.
type LeadResult struct {
	Led  bool
	Left time.Duration
}

// pgLeadSQL takes or renews the leadership for $2 until ttl ($3, in
// microseconds) from now: it inserts the row, or updates it if its holder
// is $2 or it has expired. The upsert locks the row, so two runners that
// campaign at once take turns, and the second sees the first's lease. The
// holder's lease is read from the statement's snapshot, before the upsert.
const pgLeadSQL = `WITH up AS (
	INSERT INTO sheaf_leader AS l (name, holder, elected_at, expires_at)
	VALUES ($1, $2, now(), now() + $3 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
		elected_at = CASE WHEN l.holder = excluded.holder AND l.expires_at > now() THEN l.elected_at ELSE now() END
	WHERE l.holder = excluded.holder OR l.expires_at <= now()
	RETURNING 1)
SELECT EXISTS (SELECT 1 FROM up),
	coalesce((SELECT extract(epoch FROM expires_at - now())::float8 FROM sheaf_leader WHERE name = $1), 0)`

// Lead makes holder the leader for ttl from the database's now, if the
// leadership is free, has expired, or is holder's already (a renewal).
func (s *postgres) Lead(ctx context.Context, holder string, ttl time.Duration) (LeadResult, error) {
	var res LeadResult
	var left float64
	err := s.db.QueryRowContext(ctx, pgLeadSQL, leadership, holder, ttl.Microseconds()).Scan(&res.Led, &left)
	if !res.Led {
		res.Left = max(time.Duration(left*float64(time.Second)), 0)
	}
	return res, err
}

// Resign gives up holder's leadership, if it holds it, so that another
// runner takes over at its next campaign rather than at the lease's end.
func (s *postgres) Resign(ctx context.Context, holder string) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM sheaf_leader WHERE name = $1 AND holder = $2", leadership, holder)
	return err
}

// Leader returns the runner that leads, or "" if none does.
func (s *postgres) Leader(ctx context.Context) (string, error) {
	return leader(s.db.QueryRowContext(ctx, "SELECT holder FROM sheaf_leader WHERE name = $1 AND expires_at > now()", leadership))
}

func leader(row *sql.Row) (holder string, err error) {
	err = row.Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return holder, err
}

// Lead is PostgreSQL's Lead in the process's turn to write, by the
// process's clock.
func (s *sqlite) Lead(ctx context.Context, holder string, ttl time.Duration) (res LeadResult, err error) {
	err = s.writing(ctx, func() error {
		t := now()
		at := sqliteTime(t)
		rows, err := s.db.QueryContext(ctx, `INSERT INTO sheaf_leader AS l (name, holder, elected_at, expires_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
				elected_at = CASE WHEN l.holder = excluded.holder AND l.expires_at > ?3 THEN l.elected_at ELSE ?3 END
			WHERE l.holder = excluded.holder OR l.expires_at <= ?3
			RETURNING 1`, leadership, holder, at, sqliteTime(t.Add(ttl)))
		if err != nil {
			return err
		}
		res.Led = rows.Next()
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil || res.Led {
			return err
		}
		var until sqlTime
		if err := s.db.QueryRowContext(ctx, "SELECT expires_at FROM sheaf_leader WHERE name = ?1", leadership).Scan(&until); err != nil {
			return err
		}
		res.Left = max(until.t.Sub(t), 0)
		return nil
	})
	return res, err
}

func (s *sqlite) Resign(ctx context.Context, holder string) error {
	return s.writing(ctx, func() error {
		_, err := s.db.ExecContext(ctx, "DELETE FROM sheaf_leader WHERE name = ?1 AND holder = ?2", leadership, holder)
		return err
	})
}

func (s *sqlite) Leader(ctx context.Context) (string, error) {
	return leader(s.db.QueryRowContext(ctx, "SELECT holder FROM sheaf_leader WHERE name = ?1 AND expires_at > ?2",
		leadership, sqliteTime(now())))
}
