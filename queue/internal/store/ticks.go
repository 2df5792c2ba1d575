package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// SchedulesTable holds each schedule's last fired tick.
const SchedulesTable = "sheaf_schedules"

// LastTicks returns the last tick each schedule fired, by name: every
// schedule that a runner has started, whatever the registry now holds.
func LastTicks(ctx context.Context, db *gorm.DB) (map[string]time.Time, error) {
	rows, err := db.WithContext(ctx).Raw("SELECT name, last_tick FROM " + SchedulesTable).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at sqlTime
		if err := rows.Scan(&name, &at); err != nil {
			return nil, err
		}
		out[name] = at.t
	}
	return out, rows.Err()
}
