package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"gorm.io/gorm"
)

// A schedule's row holds its last tick: runners claim a tick by moving it
// forward under the row's lock, in the transaction that creates the tick's
// jobs, so a tick creates its jobs once however many runners run it.

// LockSchedule locks schedule name's row inside tx and returns its last
// tick; found is false if the schedule has no row yet.
func (*postgres) LockSchedule(tx *gorm.DB, name string) (last time.Time, found bool, err error) {
	err = tx.Raw("SELECT last_tick FROM sheaf_schedules WHERE name = ? FOR UPDATE", name).Row().Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return last, err == nil, err
}

// AddSchedule gives schedule name a row with last tick last, unless it has
// one.
func (*postgres) AddSchedule(tx *gorm.DB, name string, last time.Time) error {
	return tx.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", name, last).Error
}

// SetLastTick moves schedule name's last tick to at.
func (*postgres) SetLastTick(tx *gorm.DB, name string, at time.Time) error {
	return tx.Exec("UPDATE sheaf_schedules SET last_tick = ?, updated_at = now() WHERE name = ?", at, name).Error
}

// preflightSQL reads, in one round trip, the schema version and how many
// more client connections the server accepts.
const preflightSQL = `
SELECT (SELECT coalesce(max(version), 0) FROM sheaf_migrations),
	current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`

// Preflight reads the schema's version and how many more client connections
// the server accepts. A schema never migrated fails with the server's
// undefined-table error.
func (s *postgres) Preflight(ctx context.Context) (version, room int, err error) {
	err = s.db.QueryRowContext(ctx, preflightSQL).Scan(&version, &room)
	return version, room, err
}
