package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// ownedTables are the queue's tables at SchemaVersion, in the order the
// migrations create them.
var ownedTables = []string{"sheaf_migrations", "sheaf_jobs", "sheaf_schedules", "sheaf_queues", "sheaf_attempts", "sheaf_runners", "sheaf_audit",
	"sheaf_leader", "sheaf_history", "sheaf_rollup",
	"sheaf_alert_episodes", "sheaf_alert_notices", "sheaf_alert_silences", "sheaf_ticks", "sheaf_runs", "sheaf_outbox", "sheaf_limits", "sheaf_limit_starts",
	"sheaf_hours", "sheaf_hours_final", "sheaf_limit_weights"}

// ownedBut is ownedTables without some.
func ownedBut(some ...string) []string {
	return slices.DeleteFunc(slices.Clone(ownedTables), func(t string) bool { return slices.Contains(some, t) })
}

// A schema whose tables were partly dropped by hand, or whose version
// table was, fails Migrate with ErrPartialSchema, naming the tables found
// and those missing, and changes nothing. Dropping the tables the error
// names lets Migrate start afresh.
func TestMigrateNamesTheTablesOfAPartialSchema(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(db *gorm.DB) error
		want   string
		found  []string // what the error tells to drop
	}{{
		name:   "some tables of the version recorded dropped",
		damage: drop("sheaf_queues", "sheaf_attempts"),
		want: fmt.Sprintf("sheaf_migrations records version %d, whose sheaf_queues, sheaf_attempts are missing: restore what was dropped from a backup, "+
			"or drop %s (losing the jobs they hold) and call Migrate again", store.SchemaVersion, strings.Join(ownedBut("sheaf_queues", "sheaf_attempts"), ", ")),
		found: ownedBut("sheaf_queues", "sheaf_attempts"),
	}, {
		name:   "the version table dropped",
		damage: drop("sheaf_migrations"),
		want: fmt.Sprintf("no version is recorded (sheaf_migrations is missing or empty), yet %[1]s are there: "+
			"restore what was dropped from a backup, or drop %[1]s", strings.Join(ownedTables[1:], ", ")),
		found: ownedTables[1:],
	}, {
		name:   "every table but the schedules dropped",
		damage: drop(ownedBut("sheaf_schedules")...),
		want:   "yet sheaf_schedules is there: restore what was dropped from a backup, or drop sheaf_schedules (losing",
		found:  []string{"sheaf_schedules"},
	}, {
		name: "versions forgotten",
		damage: func(db *gorm.DB) error {
			return db.Exec("DELETE FROM sheaf_migrations WHERE version > 2").Error
		},
		want:  "sheaf_migrations records version 2, and " + strings.Join(ownedTables[3:], ", ") + " of a later version are there: ",
		found: ownedTables,
	}} {
		t.Run(c.name, func(t *testing.T) {
			forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
				ctx := context.Background()
				require.NoError(t, c.damage(db))

				_, err := st.Migrate(ctx)
				require.ErrorIs(t, err, store.ErrPartialSchema)
				require.ErrorContains(t, err, c.want)
				_, again := st.Migrate(ctx)
				require.EqualError(t, again, err.Error(), "the failed Migrate changed nothing")

				require.NoError(t, drop(c.found...)(db))
				found, err := st.Migrate(ctx)
				require.NoError(t, err, "from nothing")
				require.Zero(t, found)
				var n int
				require.NoError(t, db.Raw("SELECT count(*) FROM sheaf_migrations").Scan(&n).Error)
				require.Equal(t, store.SchemaVersion, n)
			})
		})
	}
}

// drop returns a function that drops tables.
func drop(tables ...string) func(db *gorm.DB) error {
	return func(db *gorm.DB) error {
		for _, t := range tables {
			if err := db.Exec("DROP TABLE " + t).Error; err != nil {
				return err
			}
		}
		return nil
	}
}
