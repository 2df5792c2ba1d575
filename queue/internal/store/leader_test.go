package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// expireLeadership ends the leader's lease a second ago by the store's
// clock, as if it had stopped renewing it.
func expireLeadership(t *testing.T, st store.Store, db *gorm.DB) {
	t.Helper()
	q := "UPDATE sheaf_leader SET expires_at = now() - interval '1 second'"
	switch st.Dialect() {
	case "mysql":
		q = "UPDATE sheaf_leader SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
	case "sqlite":
		q = fmt.Sprintf("UPDATE sheaf_leader SET expires_at = '%s'", time.Now().Add(-time.Second).UTC().Format(store.SQLiteTimeLayout))
	}
	require.NoError(t, db.Exec(q).Error)
}

// One runner leads at a time: a second is refused while the lease lasts,
// and told how long it has left; the leader renews; once the lease has
// expired another takes over, and the first is refused; a resignation
// frees the leadership at once, and only the holder's counts. The
// runners' list marks the leader.
func TestLeadership(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		lead := func(holder string) store.LeadResult {
			t.Helper()
			res, err := st.Lead(ctx, holder, time.Minute)
			require.NoError(t, err)
			return res
		}
		leader := func() string {
			t.Helper()
			h, err := st.Leader(ctx)
			require.NoError(t, err)
			return h
		}
		require.Empty(t, leader(), "none leads before an election")

		require.True(t, lead("a").Led)
		b := lead("b")
		require.False(t, b.Led, "a leads")
		require.Greater(t, b.Left, 50*time.Second, "a's lease has most of a minute left")
		require.LessOrEqual(t, b.Left, time.Minute)
		require.True(t, lead("a").Led, "a renews")
		require.Equal(t, "a", leader())

		conn := st.Hold(false)
		defer conn.Close()
		for _, id := range []string{"a", "b"} {
			require.NoError(t, conn.SeeRunner(ctx, store.RunnerRow{ID: id, Queues: []string{"q"}, Workers: 1}, true))
		}
		rows, err := st.Runners(ctx, time.Minute)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.True(t, rows[0].Leader, "a leads")
		require.False(t, rows[1].Leader)

		expireLeadership(t, st, db)
		require.Empty(t, leader(), "an expired lease leads nothing")
		rows, err = st.Runners(ctx, 0)
		require.NoError(t, err)
		require.False(t, rows[0].Leader || rows[1].Leader)
		require.True(t, lead("b").Led, "b takes over once a's lease has expired")
		require.False(t, lead("a").Led, "a has lost it")
		require.Equal(t, "b", leader())

		require.NoError(t, st.Resign(ctx, "a"), "a resignation by a runner that does not lead")
		require.Equal(t, "b", leader(), "changes nothing")
		require.NoError(t, st.Resign(ctx, "b"))
		require.Empty(t, leader())
		require.True(t, lead("a").Led, "a takes over at once after b resigned")
	})
}

// Runners that campaign at the same time elect one of them, and only one,
// both for a free leadership and for an expired one.
func TestConcurrentCampaignsElectOne(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		const runners, rounds = 4, 5
		elect := func() map[string]int {
			var mu sync.Mutex
			won := map[string]int{}
			var wg sync.WaitGroup
			for i := range runners {
				wg.Go(func() {
					for range rounds {
						res, err := st.Lead(ctx, fmt.Sprint("r", i), time.Minute)
						if err != nil {
							t.Error(err)
							return
						}
						if res.Led {
							mu.Lock()
							won[fmt.Sprint("r", i)]++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			return won
		}
		first := elect()
		require.Len(t, first, 1, "one leader: %v", first)
		expireLeadership(t, st, db)
		second := elect()
		require.Len(t, second, 1, "one leader after the lease expired: %v", second)
		for h := range second {
			got, err := st.Leader(ctx)
			require.NoError(t, err)
			require.Equal(t, h, got)
		}
	})
}
