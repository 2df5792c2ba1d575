package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// dbTime binds a time as st writes it.
func dbTime(st store.Store, t time.Time) any {
	if st.Dialect() == "sqlite" {
		return t.UTC().Format(store.SQLiteTimeLayout)
	}
	return t
}

// finish marks job id finished with status at, started a second earlier.
func finish(t *testing.T, st store.Store, db *gorm.DB, id int64, status string, at time.Time) {
	t.Helper()
	require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = ?, attempts = 2, started_at = ?, completed_at = ?, last_error = ? WHERE id = ?",
		status, dbTime(st, at.Add(-time.Second)), dbTime(st, at), "boom 42", id).Error)
}

func remaining(t *testing.T, db *gorm.DB) []int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, db.Raw("SELECT id FROM sheaf_jobs ORDER BY id").Scan(&ids).Error)
	return ids
}

// jsonArg is a bound JSON text in st's SQL.
func jsonArg(st store.Store) string {
	switch st.Dialect() {
	case "sqlite":
		return "CAST(? AS BLOB)"
	case "mysql":
		return "?"
	}
	return "CAST(? AS jsonb)"
}

func strp(s string) *string { return &s }

// Prune deletes what its rules no longer keep, with its attempts and the
// audit entries that target it alone; it keeps what a rule keeps forever,
// what is recent, and jobs of a run or period that is not all due.
// Rules that keep everything forever delete nothing, and are no error.
func TestPruneKeepingEverythingForever(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		ins := insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"})
		finish(t, st, db, ins[0].ID, "COMPLETED", time.Now().Add(-48*time.Hour))
		var rules []store.KeepRule
		for _, status := range []string{"COMPLETED", "FAILED", "CANCELLED"} {
			rules = append(rules, store.KeepRule{Status: status, Forever: true})
		}
		res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.True(t, res.Done)
		require.Empty(t, res.Deleted)
		require.Equal(t, []int64{ins[0].ID}, remaining(t, db))
	})
}

func TestPruneDeletesWhatNoRuleKeeps(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		old, recent := now.Add(-48*time.Hour), now.Add(-time.Minute)
		ins := insertJobs(t, st, db,
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},                             // 1 old completed: goes
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},                             // 2 recent completed: stays
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},                             // 3 old failed, kept forever
			store.NewJob{Kind: "b", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp("r1")},          // 4 old completed, run unfinished
			store.NewJob{Kind: "b", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp("r1")},          // 5 queued
			store.NewJob{Kind: "b", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", Period: strp("2026-01-01")}, // 6 old completed, period has a recent failure
			store.NewJob{Kind: "c", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", Period: strp("2026-01-01")}, // 7 recent cancelled
			store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},                             // 8 old completed, kind kept forever
		)
		id := func(i int) int64 { return ins[i-1].ID }
		finish(t, st, db, id(1), "COMPLETED", old)
		finish(t, st, db, id(2), "COMPLETED", recent)
		finish(t, st, db, id(3), "FAILED", old)
		finish(t, st, db, id(4), "COMPLETED", old)
		finish(t, st, db, id(6), "COMPLETED", old)
		finish(t, st, db, id(7), "CANCELLED", recent)
		finish(t, st, db, id(8), "COMPLETED", old)
		for _, q := range []string{
			"INSERT INTO sheaf_attempts (job_id, claim, outcome) VALUES (?, 1, 'retried')",
			"INSERT INTO sheaf_audit (actor, action, target, result) VALUES ('ann', 'retry', " + jsonArg(st) + ", 'ok')",
		} {
			for _, j := range []int64{id(1), id(2)} {
				arg := any(j)
				if strings.Contains(q, "audit") {
					arg = fmt.Sprintf(`{"job": %d}`, j)
				}
				require.NoError(t, db.Exec(q, arg).Error)
			}
		}
		require.NoError(t, db.Exec("INSERT INTO sheaf_audit (actor, action, target, result) VALUES ('ann', 'retry', "+jsonArg(st)+", 'ok')",
			`{"ids": [1, 2]}`).Error)
		cut := now.Add(-time.Hour)
		rules := []store.KeepRule{
			{Kind: "k", Status: "COMPLETED", Forever: true},
			{Status: "COMPLETED", Before: cut}, {Status: "CANCELLED", Before: cut}, {Status: "FAILED", Forever: true},
		}
		res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.True(t, res.Done)
		require.Equal(t, []int64{id(1)}, res.Deleted)
		require.Equal(t, []int64{id(2), id(3), id(4), id(5), id(6), id(7), id(8)}, remaining(t, db))
		var attempts, audits []int64
		require.NoError(t, db.Raw("SELECT job_id FROM sheaf_attempts ORDER BY job_id").Scan(&attempts).Error)
		require.Equal(t, []int64{id(2)}, attempts)
		require.NoError(t, db.Raw("SELECT id FROM sheaf_audit").Scan(&audits).Error)
		require.Len(t, audits, 2, "the entry of the job that stays and the one of a list stay")

		// The run finishes and the period's last job comes due: both go.
		finish(t, st, db, id(5), "COMPLETED", old)
		finish(t, st, db, id(7), "CANCELLED", old)
		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{id(6), id(7)}, res.Deleted, "the run's jobs wait for its counts to be kept")
		_, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{id(4), id(5)}, res.Deleted)
		require.Equal(t, []int64{id(2), id(3), id(8)}, remaining(t, db))
	})
}

// A batch whose jobs are all kept still moves the walk on, so jobs after
// them are reached; an archive that fails deletes nothing.
func TestPruneWalksPastKeptJobsAndArchivesFirst(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		ins := insertJobs(t, st, db,
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp("r")},
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp("r")},
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"})
		finish(t, st, db, ins[0].ID, "COMPLETED", now.Add(-3*time.Hour)) // its run's other job is queued
		finish(t, st, db, ins[2].ID, "COMPLETED", now.Add(-2*time.Hour))
		rules := []store.KeepRule{{Status: "COMPLETED", Before: now.Add(-time.Hour)}}

		res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 1})
		require.NoError(t, err)
		require.Empty(t, res.Deleted)
		require.False(t, res.Done)
		require.Equal(t, ins[0].ID, res.Next.ID)

		boom := errors.New("disk full")
		var seen []int64
		_, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 1, After: res.Next, Archive: func(tx *gorm.DB, ids []int64) error {
			seen = ids
			return boom
		}})
		require.ErrorIs(t, err, boom)
		require.Equal(t, []int64{ins[2].ID}, seen)
		require.Len(t, remaining(t, db), 3, "a failed archive deletes nothing")

		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 1, After: res.Next, Archive: func(tx *gorm.DB, ids []int64) error {
			var n int64
			require.NoError(t, tx.Raw("SELECT count(*) FROM sheaf_jobs WHERE id = ?", ids[0]).Scan(&n).Error)
			require.EqualValues(t, 1, n, "the archive sees the jobs before they go")
			return nil
		}})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[2].ID}, res.Deleted)
		require.Equal(t, []int64{ins[0].ID, ins[1].ID}, remaining(t, db))

		_, err = st.Prune(ctx, store.Prune{Rules: rules})
		require.ErrorContains(t, err, "limit 0 not positive")
	})
}

// The walk goes oldest first across kinds, a span of finish times at a
// time: batches of two reach every job due once, past a kind kept forever
// and across spans with no job at all (a fortnight between two jobs),
// each batch starting where the last stopped, and the walk ends at the
// latest time a rule deletes before.
func TestPruneWalksOldestFirstAcrossKinds(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		var due, kept []int64
		ago := []time.Duration{400, 399, 398, 60, 59, 58, 57, 3}
		for i, kind := range []string{"c", "a", "k", "c", "a", "c", "k", "b"} {
			id := insertJobs(t, st, db, store.NewJob{Kind: kind, Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"})[0].ID
			finish(t, st, db, id, "COMPLETED", now.Add(-ago[i]*time.Hour))
			if kind == "k" || ago[i] < 24 {
				kept = append(kept, id)
			} else {
				due = append(due, id)
			}
		}
		rules := []store.KeepRule{{Kind: "k", Status: "COMPLETED", Forever: true}, {Status: "COMPLETED", Before: now.Add(-24 * time.Hour)}}
		var deleted []int64
		var places []store.Place
		p := store.Prune{Rules: rules, Limit: 2}
		for batches := 1; ; batches++ {
			require.LessOrEqual(t, batches, 4, "five jobs due, two a batch")
			res, err := st.Prune(ctx, p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(res.Deleted), 2)
			deleted = append(deleted, res.Deleted...)
			if res.Done {
				break
			}
			places = append(places, res.Next)
			p.After = res.Next
		}
		require.ElementsMatch(t, due, deleted, "every job due, once")
		slices.Sort(kept)
		require.Equal(t, kept, remaining(t, db))
		for i := 1; i < len(places); i++ {
			require.True(t, places[i-1].At.Before(places[i].At), "oldest first: %v then %v", places[i-1].At, places[i].At)
		}
	})
}

// A batch reads finished jobs no further than the latest time a rule
// deletes before: on PostgreSQL, a batch that finds one job due among
// many finished later reads the one, not the many. Rules that keep
// everything forever read nothing.
func TestPruneReadsNoFurtherThanItsRules(t *testing.T) {
	t.Parallel()
	st, db := migratedPostgres(t)
	ctx := context.Background()
	now := time.Now().UTC()
	require.NoError(t, db.Exec(`INSERT INTO sheaf_jobs (kind, status, started_at, completed_at)
		SELECT 'a', 'COMPLETED', t, t FROM (SELECT CAST(? AS timestamptz) - g * interval '1 second' AS t FROM generate_series(1, 500) g) s`, now).Error)
	old := insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "default", Priority: 5, Attempts: 3, Payload: "{}"})[0].ID
	finish(t, st, db, old, "COMPLETED", now.Add(-48*time.Hour))
	require.NoError(t, db.Exec("ANALYZE sheaf_jobs").Error)

	rules := []store.KeepRule{{Status: "COMPLETED", Before: now.Add(-time.Hour)}, {Status: "FAILED", Forever: true}}
	q, args := store.PruneCandidates(st, rules, []string{"a"}, store.Place{At: now.Add(-72 * time.Hour)}, now.Add(-time.Hour), 100)
	var plan []byte
	require.NoError(t, db.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Row().Scan(&plan))
	var nodes []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal(plan, &nodes))
	require.Len(t, nodes, 1)
	require.Equal(t, 1.0, nodes[0].Plan.read("sheaf_jobs"), "rows of sheaf_jobs read, kept or not:\n%s", plan)

	res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, []int64{old}, res.Deleted)
	require.True(t, res.Done)

	for i := range rules {
		rules[i].Forever = true
	}
	res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
	require.NoError(t, err)
	require.True(t, res.Done, "nothing to read when every job is kept forever")
	require.Empty(t, res.Deleted)
}

// planNode is a node of a PostgreSQL plan in JSON, as EXPLAIN (ANALYZE)
// writes it.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Plans    []planNode `json:"Plans"`
}

// shape is the plan's nodes, each a type and a relation, for a failing
// test to show without the arguments its conditions quote.
func (n planNode) shape() string {
	s := n.Type + " " + n.Relation + " ("
	for _, c := range n.Plans {
		s += c.shape() + " "
	}
	return s + ")"
}

// read is how many rows of relation the nodes under n read: those they
// returned and those their filters removed.
func (n planNode) read(relation string) float64 {
	var sum float64
	if n.Relation == relation {
		sum += n.Rows + n.Removed
	}
	for _, c := range n.Plans {
		sum += c.read(relation)
	}
	return sum
}

// Day roll-ups replace a day's rows, mark days final, and are read back by
// day, kind and queue.
func TestDayRollups(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		ins := insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"})
		_, ok, err := st.FirstFinished(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		finish(t, st, db, ins[0].ID, "FAILED", at)
		first, ok, err := st.FirstFinished(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, first.Equal(at), "%v", first)
		var got []store.FinishedJob
		require.NoError(t, st.Finished(ctx, at.Add(-time.Hour), at.Add(time.Hour), func(j store.FinishedJob) { got = append(got, j) }))
		require.Len(t, got, 1)
		require.Equal(t, "FAILED", got[0].Status)
		require.Equal(t, "boom 42", *got[0].LastError)
		require.Equal(t, time.Second, got[0].Finished.Sub(*got[0].Started))

		fb, err := st.FinalBefore(ctx)
		require.NoError(t, err)
		require.Empty(t, fb)
		rows := []store.DayRow{{Day: "2026-03-04", Kind: "a", Queue: "q", Failed: 1, Retries: 1, Errors: []byte(`{"boom <n>": 1}`)},
			{Day: "2026-03-04", Kind: "b", Queue: "q", Completed: 2, P50us: 10, P95us: 20, MaxUsec: 30}}
		require.NoError(t, st.PutDay(ctx, "2026-03-04", rows[1:]))
		require.NoError(t, st.PutDay(ctx, "2026-03-04", rows), "again: the day's rows are replaced")
		fb, err = st.FinalBefore(ctx)
		require.NoError(t, err)
		require.Equal(t, "2026-03-05", fb)
		require.NoError(t, st.PutDay(ctx, "2026-03-05", rows[1:]))
		fb, err = st.FinalBefore(ctx)
		require.NoError(t, err)
		require.Equal(t, "2026-03-06", fb)

		days, err := st.Days(ctx, db, store.DayQuery{From: "2026-03-01", To: "2026-03-05"})
		require.NoError(t, err)
		require.Len(t, days, 2)
		require.Equal(t, "2026-03-04", days[0].Day)
		require.JSONEq(t, `{"boom <n>": 1}`, string(days[0].Errors))
		require.Equal(t, rows[1].MaxUsec, days[1].MaxUsec)
		days, err = st.Days(ctx, db, store.DayQuery{Kind: "b", Queue: "q", From: "2026-03-01", To: "2026-03-09"})
		require.NoError(t, err)
		require.Len(t, days, 2)
		require.Equal(t, "2026-03-05", days[1].Day)

		n, err := st.DropDays(ctx, "2026-03-05")
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
	})
}

// A finished run whose counts are kept is judged from its row in sheaf_runs,
// not from its jobs: due when each kind and status it holds has a rule that
// deletes and its last job finished before every such rule's time; open
// when a status is kept forever or by no rule, or its counts were cleared;
// and read job by job when the row cannot tell. Each verdict prunes as
// reading every job would.
func TestPruneJudgesAFinishedRunByItsKeptCounts(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		old := now.Add(-48 * time.Hour)
		cut := now.Add(-time.Hour)
		in := func(run string) []int64 {
			ins := insertJobs(t, st, db,
				store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp(run)},
				store.NewJob{Kind: "b", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp(run)})
			finish(t, st, db, ins[0].ID, "COMPLETED", old)
			finish(t, st, db, ins[1].ID, "FAILED", old.Add(time.Minute))
			return []int64{ins[0].ID, ins[1].ID}
		}
		due, late, bare, gone := in("due"), in("late"), in("bare"), in("gone")
		_, err := store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET kinds = NULL WHERE run_id = 'bare'").Error) // kept before version 23
		require.NoError(t, db.Exec("DELETE FROM sheaf_runs WHERE run_id = 'gone'").Error)

		deletes := []store.KeepRule{{Status: "COMPLETED", Before: cut}, {Status: "FAILED", Before: cut}}
		for _, tc := range []struct {
			run, want string
			rules     []store.KeepRule
		}{
			{"due", "due", deletes},
			{"due", "open", []store.KeepRule{{Status: "COMPLETED", Before: cut}, {Status: "FAILED", Forever: true}}},
			{"due", "open", []store.KeepRule{{Status: "COMPLETED", Before: cut}}},
			{"due", "open", []store.KeepRule{{Kind: "b", Status: "FAILED", Forever: true}, {Status: "COMPLETED", Before: cut}, {Status: "FAILED", Before: cut}}},
			{"due", "unknown", []store.KeepRule{{Status: "COMPLETED", Before: cut}, {Status: "FAILED", Before: old}}},
			{"bare", "unknown", deletes},
			{"gone", "unknown", deletes},
		} {
			got, err := store.PruneRunVerdict(st, db, tc.run, tc.rules)
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "%s %+v", tc.run, tc.rules)
		}
		// The failed job of "late" is kept an hour past its finish: the
		// row cannot tell, and its jobs say the run is not all due.
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET completed_at = ? WHERE id = ?", dbTime(st, now.Add(-time.Minute)), late[1]).Error)
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET last_finished = ? WHERE run_id = 'late'", dbTime(st, now.Add(-time.Minute))).Error)
		got, err := store.PruneRunVerdict(st, db, "late", deletes)
		require.NoError(t, err)
		require.Equal(t, "unknown", got)

		res, err := st.Prune(ctx, store.Prune{Rules: deletes, Limit: 100})
		require.NoError(t, err)
		require.ElementsMatch(t, slices.Concat(due, bare, gone), res.Deleted)
		require.Equal(t, late, remaining(t, db))

		// A job added to a finished run clears its counts: the run is open.
		more := in("more")
		_, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		got, err = store.PruneRunVerdict(st, db, "more", deletes)
		require.NoError(t, err)
		require.Equal(t, "due", got)
		insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: strp("more")})
		got, err = store.PruneRunVerdict(st, db, "more", deletes)
		require.NoError(t, err)
		require.Equal(t, "open", got)
		res, err = st.Prune(ctx, store.Prune{Rules: deletes, Limit: 100})
		require.NoError(t, err)
		require.Empty(t, res.Deleted)
		require.Subset(t, remaining(t, db), more)

		if st.Dialect() == "sqlite" {
			return // one writer at a time: nothing to wait for
		}
		// While a batch holds a finished run's row, a job restarted in
		// the run, which clears its counts, waits for the batch.
		_, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET counts = NULL WHERE run_id = 'late'").Error)
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET completed_at = ? WHERE id = ?", dbTime(st, old), late[1]).Error)
		_, err = store.KeepRunCounts(ctx, st, db, 100)
		require.NoError(t, err)
		require.NoError(t, db.Transaction(func(batch *gorm.DB) error {
			got, err := store.PruneRunVerdict(st, batch, "late", deletes)
			require.NoError(t, err)
			require.Equal(t, "due", got)
			waitOn := "SET LOCAL lock_timeout = '200ms'"
			if st.Dialect() == "mysql" {
				waitOn = "SET SESSION innodb_lock_wait_timeout = 1"
			}
			err = db.Transaction(func(other *gorm.DB) error {
				require.NoError(t, other.Exec(waitOn).Error)
				return st.Retry(other, late[0])
			})
			require.Error(t, err, "the restart waits for the batch's lock")
			return nil
		}))
		require.NoError(t, db.Transaction(func(other *gorm.DB) error { return st.Retry(other, late[0]) }))
		got, err = store.PruneRunVerdict(st, db, "late", deletes)
		require.NoError(t, err)
		require.Equal(t, "open", got, "once the batch is over, the restart clears the counts")
	})
}

// A period keeps its jobs while one of them is not due, for each reason:
// a job queued or running, finished too recently for its rule (a kind's
// own rule first), finished without a time, kept forever, or of a status
// no rule deletes.
func TestPruneKeepsAPeriodWhileAJobIsNotDue(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		now := time.Now().UTC()
		rules := []store.KeepRule{
			{Kind: "forever", Status: "COMPLETED", Forever: true},
			{Kind: "brief", Status: "COMPLETED", Before: now.Add(-10 * time.Minute)},
			{Status: "COMPLETED", Before: now.Add(-time.Hour)},
			{Status: "FAILED", Before: now.Add(-7 * 24 * time.Hour)},
		} // CANCELLED: no rule, kept
		old, recent := now.Add(-48*time.Hour), now.Add(-30*time.Minute)
		type job struct {
			kind, status string
			at           time.Time // zero: no finish time
		}
		cases := []struct {
			name    string
			jobs    []job
			blocked bool
		}{
			{"all due", []job{{"a", "COMPLETED", old}, {"b", "COMPLETED", old}, {"brief", "COMPLETED", recent}}, false},
			{"queued", []job{{"a", "COMPLETED", old}, {"b", "QUEUED", time.Time{}}}, true},
			{"running", []job{{"a", "COMPLETED", old}, {"b", "PROCESSING", time.Time{}}}, true},
			{"recent", []job{{"a", "COMPLETED", old}, {"b", "COMPLETED", recent}}, true},
			{"no finish time", []job{{"a", "COMPLETED", old}, {"b", "COMPLETED", time.Time{}}}, true},
			{"kept forever", []job{{"a", "COMPLETED", old}, {"forever", "COMPLETED", old}}, true},
			{"kept longer by status", []job{{"a", "COMPLETED", old}, {"a", "FAILED", old}}, true},
			{"no rule", []job{{"a", "COMPLETED", old}, {"a", "CANCELLED", old}}, true},
		}
		for _, c := range cases {
			for _, j := range c.jobs {
				ins := insertJobs(t, st, db, store.NewJob{Kind: j.kind, Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", Period: strp(c.name)})
				var at any
				if !j.at.IsZero() {
					at = dbTime(st, j.at)
				}
				require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = ?, completed_at = ? WHERE id = ?", j.status, at, ins[0].ID).Error)
			}
			blocked, err := store.PrunePeriodBlocked(st, db, c.name, rules)
			require.NoError(t, err)
			require.Equal(t, c.blocked, blocked, c.name)
		}
		blocked, err := store.PrunePeriodBlocked(st, db, "no such period", rules)
		require.NoError(t, err)
		require.False(t, blocked, "a period without jobs")

		// A batch deletes the due period's jobs and keeps the others'.
		res, err := st.Prune(context.Background(), store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		var left []string
		require.NoError(t, db.Raw("SELECT DISTINCT period FROM sheaf_jobs ORDER BY period").Scan(&left).Error)
		require.Len(t, res.Deleted, 3)
		require.NotContains(t, left, "all due")
		require.Len(t, left, len(cases)-1)
	})
}

// A pass finds the kinds that have finished jobs at its first batch and
// hands them on: a batch given the kinds reads those and no others.
func TestPruneHandsTheKindsOn(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		old := time.Now().UTC().Add(-48 * time.Hour)
		ins := insertJobs(t, st, db,
			store.NewJob{Kind: "b", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"},
			store.NewJob{Kind: "c", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}"}) // queued: not a finished kind
		finish(t, st, db, ins[0].ID, "COMPLETED", old)
		finish(t, st, db, ins[1].ID, "COMPLETED", old)
		rules := []store.KeepRule{{Status: "COMPLETED", Before: time.Now().Add(-time.Hour)}}

		res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 100, Kinds: []string{"b"}})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[0].ID}, res.Deleted)
		require.Equal(t, []string{"b"}, res.Kinds)

		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[1].ID}, res.Deleted)
		// Found anew: the kinds with finished jobs (MariaDB's reads every
		// kind, which selects more).
		require.Contains(t, res.Kinds, "a")
		require.NotContains(t, res.Kinds, "b")
		require.True(t, res.Done)
	})
}

// A batch reports the runs and periods it found held and the periods it
// read whole and found due; a later batch given them passes over the held
// ones' jobs, and trusts the due ones without reading them again.
func TestPruneHandsHeldAndDueGroupsOn(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		rules := []store.KeepRule{{Status: "COMPLETED", Before: now.Add(-time.Hour)}, {Status: "FAILED", Forever: true}}
		job := func(run, period *string) store.NewJob {
			return store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", RunID: run, Period: period}
		}
		ins := insertJobs(t, st, db,
			job(nil, strp("held")),    // 1 completed, oldest
			job(nil, strp("held")),    // 2 failed: kept forever, holds its period
			job(strp("open"), nil),    // 3 completed, its run's counts not kept
			job(nil, nil),             // 4 completed
			job(nil, strp("due")),     // 5 completed
			job(nil, strp("trusted")), // 6 completed
			job(nil, strp("trusted"))) // 7 queued
		for i, status := range []string{"COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"} {
			finish(t, st, db, ins[i].ID, status, now.Add(-48*time.Hour+time.Duration(i)*time.Minute))
		}

		// Told nothing, a batch of one reads the oldest job, held, and
		// deletes nothing.
		res, err := st.Prune(ctx, store.Prune{Rules: rules, Limit: 1})
		require.NoError(t, err)
		require.Empty(t, res.Deleted)
		require.Equal(t, []string{"held"}, res.HeldPeriods)

		// Told the held run and period, it passes over their jobs.
		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 1, HeldRuns: []string{"open"}, HeldPeriods: []string{"held"}})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[3].ID}, res.Deleted)

		// Told a period is due, it deletes its finished jobs without
		// reading it; told nothing, it reads it and finds it held.
		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[4].ID}, res.Deleted)
		require.Equal(t, []string{"open"}, res.HeldRuns)
		require.Equal(t, []string{"held", "trusted"}, res.HeldPeriods)
		require.Equal(t, []string{"due"}, res.DuePeriods)
		res, err = st.Prune(ctx, store.Prune{Rules: rules, Limit: 100, DuePeriods: []string{"trusted"}})
		require.NoError(t, err)
		require.Equal(t, []int64{ins[5].ID}, res.Deleted)
		require.Empty(t, res.DuePeriods, "a trusted period is not read")
		require.Equal(t, []int64{ins[0].ID, ins[1].ID, ins[2].ID, ins[6].ID}, remaining(t, db))
	})
}
