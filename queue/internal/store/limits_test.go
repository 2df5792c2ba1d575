package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// A limited claim takes no more than each scope's room, passes over the
// jobs of a full scope to those behind them, and counts a kind, a queue
// and each partition key apart; suspended and removed limits no longer
// hold claims back.
func TestClaimWithinLimits(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		// Ten of tenant a first, at a higher priority, then three of b,
		// then two of another kind.
		insertKeyed(t, st, db, keyed("report", "a", 9, 10), keyed("report", "b", 5, 3), keyed("mail", "", 1, 2))

		set := func(l store.Limit) {
			t.Helper()
			l.ChangedBy = "test"
			wrote, err := st.SetLimit(ctx, db, l)
			require.NoError(t, err)
			require.True(t, wrote)
		}
		set(store.Limit{Scope: store.ScopeKey, Target: "report", Concurrency: 2})
		set(store.Limit{Scope: store.ScopeKind, Target: "mail", Concurrency: 1})

		conn := st.Hold(false)
		defer conn.Close()
		claim := func(n int) map[string]int {
			t.Helper()
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r", Limited: true})
			require.NoError(t, err)
			byKind := map[string]int{}
			for _, j := range got {
				byKind[j.Kind]++
			}
			return byKind
		}
		// Two of a, two of b, one mail: a's other eight wait.
		require.Equal(t, map[string]int{"report": 4, "mail": 1}, claim(10))
		require.Empty(t, claim(10), "every scope is full")

		use, err := st.Limits(ctx, db)
		require.NoError(t, err)
		require.Len(t, use, 2)
		require.Equal(t, "key", use[0].Scope, "by scope, then target")
		require.Equal(t, []store.KeyUse{{Key: "a", Running: 2}, {Key: "b", Running: 2}}, use[0].Keys)
		require.Equal(t, "kind", use[1].Scope)
		require.Equal(t, 1, use[1].Running)

		// A declared limit does not replace the operator's.
		wrote, err := st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKind, Target: "mail", Concurrency: 5})
		require.NoError(t, err)
		require.False(t, wrote)

		// Suspended, the kind's limit holds nothing back.
		set(store.Limit{Scope: store.ScopeKind, Target: "mail", Concurrency: 1, Suspended: true})
		require.Equal(t, map[string]int{"mail": 1}, claim(10))

		// A queue limit caps the queue whatever the kinds.
		set(store.Limit{Scope: store.ScopeQueue, Target: "q", Concurrency: 6})
		require.NoError(t, st.RemoveLimit(ctx, db, store.ScopeKey, "report"))
		got := claim(10)
		require.Equal(t, map[string]int{}, got, "six running: the queue is full")
		require.ErrorIs(t, st.RemoveLimit(ctx, db, store.ScopeKey, "report"), store.ErrNoLimit)
	})
}

// A rate limit lets no more than its rate start within its period, and
// lets more start once the period has passed.
func TestClaimWithinRate(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		jobs := make([]store.NewJob, 8)
		for i := range jobs {
			jobs[i] = store.NewJob{Kind: "call", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}
		}
		var dest []struct{ ID int64 }
		require.NoError(t, st.Insert(ctx, db, jobs, &dest))
		_, err := st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKind, Target: "call", Rate: 3, Period: 300 * time.Millisecond})
		require.NoError(t, err)
		conn := st.Hold(false)
		defer conn.Close()
		claim := func() int {
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 10, Lease: time.Minute, Runner: "r", Limited: true})
			require.NoError(t, err)
			return len(got)
		}
		first := time.Now()
		require.Equal(t, 3, claim())
		// The first starts were recorded after first: a claim that has
		// returned within the period of first is within theirs.
		n := claim()
		if time.Since(first) < 300*time.Millisecond {
			require.Zero(t, n, "the period of the first three has not passed")
		}
		require.Eventually(t, func() bool { return claim() > 0 }, 10*time.Second, 20*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(first), 300*time.Millisecond)
	})
}

// A claim that no limit can cut short (each scope has room for all of it)
// counts against the limits as one that a limit cuts short: the jobs it
// starts are running and started for the claims after it.
func TestClaimWithRoomCountsAgainstTheLimits(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		insertKeyed(t, st, db, keyed("call", "", 5, 6), keyed("mail", "", 5, 6))
		_, err := st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKind, Target: "call", Rate: 5, Period: time.Hour})
		require.NoError(t, err)
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKind, Target: "mail", Concurrency: 5})
		require.NoError(t, err)
		conn := st.Hold(false)
		defer conn.Close()
		claim := func(n int) int {
			t.Helper()
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r", Limited: true})
			require.NoError(t, err)
			return len(got)
		}
		// Room of 5 in both scopes: two claims of 2 (calls) fit whole;
		// then the last call the rate allows and three mails, then the
		// two mails left of the limit, then nothing.
		require.Equal(t, 2, claim(2))
		require.Equal(t, 2, claim(2))
		require.Equal(t, 4, claim(4))
		require.Equal(t, 2, claim(4))
		require.Zero(t, claim(4))
		require.Equal(t, map[string][2]int{"call": {5, 5}, "mail": {5, 0}}, runningAndStarted(t, st, db))
	})
}

// runningAndStarted is, for each limit's target, how many jobs run under
// it and how many started in its period.
func runningAndStarted(t *testing.T, st store.Store, db *gorm.DB) map[string][2]int {
	t.Helper()
	use, err := st.Limits(context.Background(), db)
	require.NoError(t, err)
	got := map[string][2]int{}
	for _, u := range use {
		got[u.Target] = [2]int{u.Running, u.Started}
	}
	return got
}

// A runner reads the paused queues and the limits in force in one
// statement: no limit costs a round trip of its own.
func TestHoldsReadsPausesAndLimitsTogether(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		conn := st.Hold(false)
		defer conn.Close()
		paused, limits, err := conn.Holds(ctx)
		require.NoError(t, err)
		require.Empty(t, paused)
		require.Empty(t, limits)

		require.NoError(t, st.SetPaused(ctx, db, "q", true))
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKind, Target: "report", Concurrency: 3})
		require.NoError(t, err)
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeQueue, Target: "q", Concurrency: 1, Suspended: true})
		require.NoError(t, err)
		want := []store.Limit{{Scope: store.ScopeKind, Target: "report", Concurrency: 3}}
		paused, limits, err = conn.Holds(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"q"}, paused)
		require.Equal(t, want, limits, "the suspended limit is not in force")
	})
}

// Under a fair limit, a claim takes turns among the kind's keys: the keys
// with the fewest running first, so a key enqueued behind a deep backlog
// of another starts at once. Without one, claims go in queue order.
func TestFairClaimTakesTurnsAmongKeys(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		insertKeyed(t, st, db, keyed("report", "a", 5, 50), keyed("report", "b", 5, 3))
		conn := st.Hold(false)
		defer conn.Close()
		claim := func(n int, fair bool) map[string]int {
			t.Helper()
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r", Limited: true, Fair: fair})
			require.NoError(t, err)
			byKey := map[string]int{}
			for _, j := range got {
				byKey[string(j.Payload)]++
			}
			return byKey
		}
		_, err := st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Concurrency: 100})
		require.NoError(t, err)
		require.Equal(t, map[string]int{`{}`: 4}, claim(4, false))
		use, err := st.Limits(ctx, db)
		require.NoError(t, err)
		require.Equal(t, []store.KeyUse{{Key: "a", Running: 4}}, use[0].Keys, "in queue order, a's first")

		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Fair: true})
		require.NoError(t, err)
		claim(4, true)
		use, err = st.Limits(ctx, db)
		require.NoError(t, err)
		require.True(t, use[0].Fair)
		require.Equal(t, []store.KeyUse{{Key: "a", Running: 5}, {Key: "b", Running: 3}}, use[0].Keys,
			"b, with none running, has its three turns before a's fifth")
	})
}

// Weighted, a key gets as many turns as its weight to a key of weight 1's
// one, counting its running jobs as turns taken; the weights are written,
// read and removed with their limit.
func TestWeightedFairClaim(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		insertKeyed(t, st, db, keyed("report", "a", 5, 40), keyed("report", "b", 5, 40), keyed("report", "c", 5, 40))
		conn := st.Hold(false)
		defer conn.Close()
		weights := map[string]int{"a": 3, "b": 1}
		wrote, err := st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Fair: true, Weights: weights, ChangedBy: "test"})
		require.NoError(t, err)
		require.True(t, wrote)
		running := func() []store.KeyUse {
			t.Helper()
			use, err := st.Limits(ctx, db)
			require.NoError(t, err)
			require.Len(t, use, 1)
			require.Equal(t, weights, use[0].Weights)
			return use[0].Keys
		}
		claim := func(n int) {
			t.Helper()
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r", Limited: true, Fair: true})
			require.NoError(t, err)
			require.Len(t, got, n)
		}
		// Turns of a: 1/6, 1/2, 5/6, 7/6, 3/2, 11/6; of b and c (no
		// weight: 1): 1/2, 3/2.
		claim(10)
		require.Equal(t, []store.KeyUse{{Key: "a", Running: 6}, {Key: "b", Running: 2}, {Key: "c", Running: 2}}, running())
		// With those running, a's next turns are 13/6, 5/2, 17/6; b's and
		// c's 5/2.
		claim(5)
		require.Equal(t, []store.KeyUse{{Key: "a", Running: 9}, {Key: "b", Running: 3}, {Key: "c", Running: 3}}, running())

		// The limit written again without weights has none; removed, its
		// weights go with it.
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Fair: true, Weights: map[string]int{"c": 2},
			ChangedBy: "test"})
		require.NoError(t, err)
		weights = map[string]int{"c": 2}
		running()
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Fair: true, ChangedBy: "test"})
		require.NoError(t, err)
		weights = nil
		running()
		_, err = st.SetLimit(ctx, db, store.Limit{Scope: store.ScopeKey, Target: "report", Fair: true, Weights: map[string]int{"c": 2},
			ChangedBy: "test"})
		require.NoError(t, err)
		require.NoError(t, st.RemoveLimit(ctx, db, store.ScopeKey, "report"))
		var left int64
		require.NoError(t, db.Raw(`SELECT count(*) FROM sheaf_limit_weights`).Scan(&left).Error)
		require.Zero(t, left)
	})
}

// keyed is n queued jobs of kind on queue q at priority p, of partition
// key key ("" for none).
func keyed(kind, key string, p, n int) []store.NewJob {
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Kind: kind, Queue: "q", Priority: p, Attempts: 1, Payload: `{}`}
		if key != "" {
			jobs[i].LimitKey = &key
		}
	}
	return jobs
}

// insertKeyed inserts the jobs into st's migrated schema.
func insertKeyed(t *testing.T, st store.Store, db *gorm.DB, jobs ...[]store.NewJob) {
	t.Helper()
	var dest []struct{ ID int64 }
	require.NoError(t, st.Insert(context.Background(), db, slices.Concat(jobs...), &dest))
}
