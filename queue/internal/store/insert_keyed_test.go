package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// InsertKeyed stores what Insert stores and names the jobs it skipped: a
// key taken before, and a key repeated within the call; it wakes the
// runners, records runs, and inside a transaction stores nothing unless
// that commits.
func TestInsertKeyedNamesTheSkippedJobs(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		key := func(s string) *string { return &s }
		job := func(k *string, prio int) store.NewJob {
			return store.NewJob{Kind: "k", Queue: "q", Priority: prio, Attempts: 3, Payload: `{}`, Key: k}
		}
		insertJobs(t, st, db, job(key("a"), 1))
		notices := listen(t, st)

		later := job(key("d"), 9)
		later.Delay = time.Hour
		run := job(key("c"), 4)
		run.RunID = key("r")
		jobs := []store.NewJob{job(key("a"), 1), job(key("b"), 6), job(nil, 2), job(key("b"), 3), run, later}
		skipped, err := st.InsertKeyed(ctx, db, jobs)
		require.NoError(t, err)
		require.Equal(t, []int{0, 3}, skipped)

		var got []copiedRow
		require.NoError(t, st.Jobs(ctx, db, store.Filter{}, 0, &got))
		require.Len(t, got, 5)
		var keys []string
		for _, r := range got[1:] {
			if r.IdempotencyKey != nil {
				keys = append(keys, *r.IdempotencyKey)
			}
		}
		require.Equal(t, []string{"b", "c", "d"}, keys)
		require.Equal(t, 6, got[1].Priority, "the first job with a key is the one stored")
		var runs int64
		require.NoError(t, db.Table(store.RunsTable).Where("run_id = ?", "r").Count(&runs).Error)
		require.Equal(t, int64(1), runs)
		select {
		case n := <-notices:
			require.True(t, strings.HasSuffix(n, "q:6"), "the top due priority, not the later job's: %s", n)
		case <-time.After(10 * time.Second):
			t.Fatal("no notice")
		}

		none, err := st.InsertKeyed(ctx, db, []store.NewJob{job(key("e"), 1)})
		require.NoError(t, err)
		require.Empty(t, none)
		rollback := errors.New("rollback")
		err = st.Tx(ctx, db, func(tx *gorm.DB) error {
			skipped, err := st.InsertKeyed(ctx, tx, []store.NewJob{job(key("e"), 1), job(key("f"), 1)})
			require.NoError(t, err)
			require.Equal(t, []int{0}, skipped)
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		var n int64
		require.NoError(t, db.Table(store.JobsTable).Where("idempotency_key = ?", "f").Count(&n).Error)
		require.Zero(t, n, "rolled back")
	})
}
