package store

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// Limits on MariaDB: schema version 14 has their tables, but the limited
// claim, one statement on PostgreSQL and SQLite, is not written for
// MariaDB yet. Setting a limit is refused rather than accepted and not
// enforced; with none set, runners never take the limited claim.

// ErrLimitsUnsupported is returned for a limit set on a database that does
// not enforce limits.
var ErrLimitsUnsupported = errors.New("limits across runners are not supported on MariaDB/MySQL yet: use PostgreSQL or SQLite")

func (s *mysql) SetLimit(context.Context, *gorm.DB, Limit) (bool, error) {
	return false, ErrLimitsUnsupported
}

func (s *mysql) RemoveLimit(context.Context, *gorm.DB, string, string) error { return ErrNoLimit }

func (s *mysql) Limits(context.Context, *gorm.DB) ([]LimitUse, error) { return nil, nil }

func (mysqlConn) ClaimSuspectLimited(context.Context, []string, Claim) ([]Claimed, error) {
	return nil, ErrLimitsUnsupported
}

// Holds returns the paused queues; no limit is in force on MariaDB.
func (c mysqlConn) Holds(ctx context.Context) (paused []string, limits []Limit, err error) {
	return scanHolds(c.s.db.QueryContext(ctx, "SELECT '', name, 0, 0, 0, false FROM sheaf_queues WHERE paused_at IS NOT NULL"))
}
