package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// On each store, a hundred hours are rolled up 48 per Run, each once: rolled up again
// from an earlier hour, as after a crash, they count the same; roll-ups
// past Keep are dropped and the first kept hour moves with them.
func TestHourRollupNeitherDoublesNorSkips(t *testing.T) {
	t.Parallel()
	for name, newDB := range map[string]func(testing.TB) *pgtest.DB{"postgres": pgtest.New, "sqlite": pgtest.NewSQLite, "mysql": pgtest.NewMySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			st, err := store.Open(db.Gorm)
			require.NoError(t, err)
			ctx := context.Background()
			_, err = st.Migrate(ctx)
			require.NoError(t, err)
			first := time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)
			jobs := make([][]any, 100)
			for h := range jobs {
				at := first.Add(time.Duration(h)*time.Hour + 30*time.Minute)
				jobs[h] = []any{"COMPLETED", db.Time(at), db.Time(at), db.Time(at.Add(time.Second))}
			}
			insertJobs(t, db, "status, run_at, started_at, completed_at", jobs)
			now := first.Add(100*time.Hour + 10*time.Minute)
			r := &maintain.HourRollup{Store: st, Keep: maintain.Forever, Now: func() time.Time { return now }}
			total := func() int64 {
				return db.Count(t, "SELECT coalesce(sum(completed), 0) FROM sheaf_hours WHERE kind = '' AND queue = ''")
			}
			for i, want := range []time.Duration{0, 0, maintain.HoursEvery} {
				next, err := r.Run(ctx)
				require.NoError(t, err)
				require.Equal(t, want, next, "run %d", i)
				from, before, ok, err := st.HoursFinal(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, first, from.UTC())
				require.Equal(t, first.Add(time.Duration(min(48*(i+1), 100))*time.Hour), before.UTC(), "run %d", i)
				require.EqualValues(t, min(48*(i+1), 100), total(), "run %d", i)
			}
			require.EqualValues(t, 300, db.Count(t, "SELECT count(*) FROM sheaf_hours"), "k in default, default, total")

			// As if the last ten hours' transactions had not committed.
			require.NoError(t, db.Gorm.Exec("UPDATE sheaf_hours_final SET final_before = ?", db.Time(first.Add(90*time.Hour))).Error)
			next, err := r.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, maintain.HoursEvery, next)
			require.EqualValues(t, 100, total())
			require.EqualValues(t, 300, db.Count(t, "SELECT count(*) FROM sheaf_hours"))

			rows, err := st.Hours(ctx, first, first.Add(200*time.Hour), "default")
			require.NoError(t, err)
			require.Len(t, rows, 100)
			require.Equal(t, store.ActivityRow{Start: rows[7].Start, Completed: 1, WaitP50: 0, WaitP95: 0,
				RunP50: time.Second, RunP95: time.Second}, rows[7])
			require.Equal(t, first.Add(7*time.Hour), rows[7].Start.UTC())

			r.Keep = 50 * time.Hour
			_, err = r.Run(ctx)
			require.NoError(t, err)
			from, _, _, err := st.HoursFinal(ctx)
			require.NoError(t, err)
			require.Equal(t, first.Add(50*time.Hour), from.UTC())
			require.EqualValues(t, 50, total())
		})
	}
}
