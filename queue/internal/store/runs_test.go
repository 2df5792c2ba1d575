package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// runTotals is what Runs says of each run: its counts by status, by run.
func runTotals(t *testing.T, st store.Store, db *gorm.DB) (order []string, counts map[string]map[string]int64) {
	t.Helper()
	rows, err := store.Runs(context.Background(), st, db, store.RunsQuery{Limit: 100})
	require.NoError(t, err)
	counts = map[string]map[string]int64{}
	for _, r := range rows {
		if counts[r.RunID] == nil {
			order = append(order, r.RunID)
			counts[r.RunID] = map[string]int64{}
		}
		counts[r.RunID][r.Status] = r.N
	}
	return order, counts
}

// A run is listed from its first job on, whichever statement inserted it;
// once it has finished, its counts are kept and outlive its jobs; a retry,
// or a job inserted into it, makes it counted job by job again.
func TestRunsKeepFinishedCounts(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		text := func(s string) *string { return &s }
		job := func(run string) store.NewJob {
			return store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: text(run), Period: text("2026-11-24")}
		}
		var dest []struct{ ID int64 }
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job("first"), job("first"), {Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}}, &dest))
		_, err := st.Copy(ctx, []store.NewJob{job("second"), job("second"), job("second")})
		require.NoError(t, err)
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			_, err := st.InsertChild(tx, job("first"), []int64{dest[0].ID})
			return err
		}))

		order, counts := runTotals(t, st, db)
		require.Equal(t, []string{"second", "first"}, order, "newest first")
		require.Equal(t, map[string]int64{"QUEUED": 3}, counts["first"])
		require.Equal(t, map[string]int64{"QUEUED": 3}, counts["second"])

		// Nothing has finished: nothing is kept.
		kept, err := store.KeepRunCounts(ctx, st, db, 1)
		require.NoError(t, err)
		require.Empty(t, kept)

		finish := func(run string) {
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED' WHERE run_id = ?", run).Error)
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'FAILED', attempts = 1 WHERE id = (SELECT max(id) FROM sheaf_jobs WHERE run_id = ?)", run).Error)
		}
		keep := func(want int, why string) {
			t.Helper()
			kept, err := store.KeepRunCounts(ctx, st, db, 1) // a page of one: pages past open runs
			require.NoError(t, err)
			require.Len(t, kept, want, why)
		}
		finish("second")
		keep(1, "the finished run, past the older open one")

		// Pruned, the finished run keeps its counts.
		require.NoError(t, db.Exec("DELETE FROM sheaf_jobs WHERE run_id = 'second'").Error)
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 2, "FAILED": 1}, counts["second"])

		// A retried job opens its run again.
		finish("first")
		keep(1, "the other run")
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			_, err := st.RetryFailed(tx, store.Filter{}, 100)
			return err
		}))
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 2, "QUEUED": 1}, counts["first"])
		keep(0, "the retried run is open")

		// A job inserted into a finished run opens it again.
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job("second")}, &dest))
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"QUEUED": 1}, counts["second"], "counted from its jobs again")

		// Counts kept while a job was being inserted (older than the run's
		// newest job) are not read.
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'CANCELLED' WHERE run_id = 'second'").Error)
		keep(1, "the run whose new job finished")
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET max_id = max_id - 1 WHERE run_id = 'second'").Error)
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED' WHERE run_id = 'second'").Error)
		_, counts = runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 1}, counts["second"])
	})
}

// A roll-up that counts a run while a retry of one of its jobs is being
// committed waits for the retry and keeps nothing: it never keeps the
// counts of a run that is going again.
func TestRunCountsWaitForARetry(t *testing.T) {
	t.Parallel()
	st, db := migratedPostgres(t)
	ctx := context.Background()
	run := "night"
	var dest []struct{ ID int64 }
	require.NoError(t, st.Insert(ctx, db, []store.NewJob{{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run}}, &dest))
	require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'FAILED', attempts = 1").Error)

	retry := db.Begin()
	require.NoError(t, st.Retry(retry, dest[0].ID))
	kept := make(chan int, 1)
	go func() {
		n, err := store.KeepRunCounts(ctx, st, db, 10)
		assert.NoError(t, err)
		kept <- len(n)
	}()
	// The roll-up waits for the retry's lock on the run's row.
	waitForALock(t, st, db)
	require.NoError(t, retry.Commit().Error)
	require.Zero(t, <-kept)
	_, counts := runTotals(t, st, db)
	require.Equal(t, map[string]int64{"QUEUED": 1}, counts[run])
}

// A roll-up and an insert into the run it counts wait for each other: the
// roll-up that comes second counts the new job, and the insert that comes
// second clears the counts the roll-up kept. Either way no counts stand
// over a job they did not count.
func TestRunCountsAndInsertsWaitForEachOther(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() == "sqlite" {
			t.Skip("one writer at a time: nothing to wait for")
		}
		ctx := context.Background()
		run := "night"
		job := store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run}
		var dest []struct{ ID int64 }
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job}, &dest))
		finishAll := func() { require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED'").Error) }
		kept := func() int64 {
			var n int64
			require.NoError(t, db.Raw("SELECT count(*) FROM sheaf_runs WHERE counts IS NOT NULL").Scan(&n).Error)
			return n
		}
		finishAll()

		// The insert first: the roll-up waits for its commit, and then
		// finds the new job queued.
		ins := db.Begin()
		require.NoError(t, ins.Error)
		t.Cleanup(func() { ins.Rollback() }) // should the test fail with it open
		require.NoError(t, st.Insert(ctx, ins, []store.NewJob{job}, &dest))
		done := make(chan int, 1)
		go func() {
			n, err := store.KeepRunCounts(ctx, st, db, 10)
			assert.NoError(t, err)
			done <- len(n)
		}()
		waitForALock(t, st, db)
		require.NoError(t, ins.Commit().Error)
		require.Zero(t, <-done, "the run has a queued job")
		require.Zero(t, kept())

		// The roll-up first: the insert waits for it, and then clears
		// the counts it kept.
		finishAll()
		rollup := db.Begin()
		require.NoError(t, rollup.Error)
		t.Cleanup(func() { rollup.Rollback() })
		n, err := store.KeepRunCounts(ctx, st, rollup, 10)
		require.NoError(t, err)
		require.Len(t, n, 1)
		inserted := make(chan error, 1)
		go func() { inserted <- st.Insert(ctx, db, []store.NewJob{job}, &dest) }()
		waitForALock(t, st, db)
		require.NoError(t, rollup.Commit().Error)
		require.NoError(t, <-inserted)
		require.Zero(t, kept(), "the insert cleared the counts kept before it")
		_, counts := runTotals(t, st, db)
		require.Equal(t, map[string]int64{"COMPLETED": 2, "QUEUED": 1}, counts[run])
	})
}

// waitForALock waits until a session of db's schema (PostgreSQL) or
// database (MariaDB) waits for a row lock. MariaDB waits for the row of a
// lookup by key while it plans the statement, where INNODB_TRX does not
// show the wait: a statement of the database that has run for 200 ms (a
// lookup by key takes microseconds) is taken to be waiting.
func waitForALock(t *testing.T, st store.Store, db *gorm.DB) {
	t.Helper()
	q := "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = current_setting('application_name')"
	if st.Dialect() == "mysql" {
		q = `SELECT count(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND TIME_MS > 200`
	}
	require.Eventually(t, func() bool {
		var waiting int64
		require.NoError(t, db.Raw(q).Scan(&waiting).Error)
		return waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "nothing waits for a lock")
}

// A run's latest finish is read from its jobs while it goes, kept with its
// counts once it has finished, and outlives its pruned jobs.
func TestRunsKeepTheirLatestFinish(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		run := "night"
		var dest []struct{ ID int64 }
		job := store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run}
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job, job, job}, &dest))
		at := func(t time.Time) any {
			if st.Dialect() == "sqlite" {
				return t.UTC().Format(sqlitedb.TimeLayout)
			}
			return t
		}
		night := time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
		finish := func(id int64, status string, after time.Duration) {
			require.NoError(t, db.Exec("UPDATE sheaf_jobs SET status = ?, started_at = ?, completed_at = ? WHERE id = ?",
				status, at(night), at(night.Add(after)), id).Error)
		}
		finished := func() time.Time {
			t.Helper()
			rows, err := store.Runs(ctx, st, db, store.RunsQuery{Limit: 10})
			require.NoError(t, err)
			var latest time.Time
			for _, r := range rows {
				if r.Finished.After(latest) {
					latest = r.Finished
				}
			}
			return latest
		}
		require.True(t, finished().IsZero(), "nothing has finished")
		finish(dest[0].ID, "COMPLETED", 2*time.Hour)
		finish(dest[1].ID, "FAILED", 3*time.Hour)
		require.True(t, finished().Equal(night.Add(3*time.Hour)), "so far: %v", finished())

		finish(dest[2].ID, "CANCELLED", time.Hour)
		kept, err := store.KeepRunCounts(ctx, st, db, 10)
		require.NoError(t, err)
		require.Len(t, kept, 1)
		require.NoError(t, db.Exec("DELETE FROM sheaf_jobs WHERE run_id = ?", run).Error)
		require.True(t, finished().Equal(night.Add(3*time.Hour)), "kept: %v", finished())
	})
}

// Once a run has finished, its counts by kind and status, each with its
// first start, are kept with it, and a review of the run reads them there:
// the same as counted from its jobs, and still there once the jobs are
// gone; a run whose counts are cleared is counted from its jobs again.
func TestRunKeepsItsCountsByKind(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		run := "night"
		var jobs []store.NewJob
		for _, kind := range []string{"b", "a", "b", "b", "a", "c"} {
			jobs = append(jobs, store.NewJob{Kind: kind, Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run})
		}
		ins := insertJobs(t, st, db, jobs...)
		at := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)
		for i, status := range []string{"COMPLETED", "COMPLETED", "FAILED", "COMPLETED", "CANCELLED", "COMPLETED"} {
			finish(t, st, db, ins[i].ID, status, at.Add(time.Duration(10-i)*time.Minute+1500*time.Microsecond))
		}
		require.NoError(t, db.Exec("UPDATE sheaf_jobs SET started_at = NULL WHERE id = ?", ins[4].ID).Error) // cancelled unstarted
		scope := store.Filter{RunID: run}
		counted, _, err := store.CountKindStatus(ctx, st, db, scope)
		require.NoError(t, err)
		require.Len(t, counted, 5)

		kept, err := store.KeepRunCounts(ctx, st, db, 10)
		require.NoError(t, err)
		require.Len(t, kept, 1)
		require.NoError(t, db.Exec("DELETE FROM sheaf_jobs WHERE run_id = ?", run).Error) // as retention prunes them
		read, _, err := store.CountKindStatus(ctx, st, db, scope)
		require.NoError(t, err)
		require.Len(t, read, len(counted))
		for i := range counted {
			require.Equal(t, counted[i].Kind, read[i].Kind)
			require.Equal(t, counted[i].Status, read[i].Status)
			require.Equal(t, counted[i].N, read[i].N)
			require.True(t, counted[i].FirstStart.Equal(read[i].FirstStart), "%s %s: %v, kept %v",
				counted[i].Kind, counted[i].Status, counted[i].FirstStart, read[i].FirstStart)
		}

		other, _, err := store.CountKindStatus(ctx, st, db, store.Filter{RunID: run, Kinds: []string{"a"}})
		require.NoError(t, err)
		require.Empty(t, other, "a narrower scope is counted from the jobs")
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET counts = NULL WHERE run_id = ?", run).Error) // as a retry clears them
		read, _, err = store.CountKindStatus(ctx, st, db, scope)
		require.NoError(t, err)
		require.Empty(t, read, "counted from the jobs again")
	})
}

// A finished run keeps the slow jobs its review found, against what was
// kept of the run: the page answers the same thresholds (and a page no
// longer), and is stale once the run changes and its counts are kept again.
func TestRunKeepsItsSlowJobs(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		run := "night"
		var jobs []store.NewJob
		for range 4 {
			jobs = append(jobs, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, RunID: &run})
		}
		ins := insertJobs(t, st, db, jobs...)
		at := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)
		for i := range ins {
			finish(t, st, db, ins[i].ID, "COMPLETED", at.Add(time.Duration(i)*time.Minute))
		}
		basis, kept, err := store.KeptSlow(ctx, db, run)
		require.NoError(t, err)
		require.Empty(t, basis, "nothing kept of a run whose counts are not")
		require.Nil(t, kept)
		require.NoError(t, store.KeepSlow(ctx, st, db, run, store.NewRunSlow("x", nil, 1, nil, 0)))
		var slow []sql.NullString
		require.NoError(t, db.Raw("SELECT slow FROM sheaf_runs WHERE run_id = ?", run).Scan(&slow).Error)
		require.Equal(t, []sql.NullString{{}}, slow, "kept only with kept counts")

		n, err := store.KeepRunCounts(ctx, st, db, 10)
		require.NoError(t, err)
		require.Len(t, n, 1)
		basis, kept, err = store.KeptSlow(ctx, db, run)
		require.NoError(t, err)
		require.NotEmpty(t, basis)
		require.Nil(t, kept)

		thresholds := map[string]time.Duration{"a": 90 * time.Second}
		page := store.NewRunSlow(basis, thresholds, 2, []int64{ins[0].ID, ins[1].ID}, 3)
		require.NoError(t, store.KeepSlow(ctx, st, db, run, page))
		again, kept, err := store.KeptSlow(ctx, db, run)
		require.NoError(t, err)
		require.Equal(t, basis, again)
		require.Equal(t, &page, kept)
		require.True(t, kept.Answers(thresholds, 2))
		require.True(t, kept.Answers(thresholds, 1), "a shorter page is a prefix")
		require.False(t, kept.Answers(thresholds, 3), "a longer page needs the third")
		require.False(t, kept.Answers(map[string]time.Duration{"a": time.Minute}, 2))
		require.False(t, kept.Answers(map[string]time.Duration{"a": 90 * time.Second, "b": time.Minute}, 2))
		require.False(t, kept.Answers(map[string]time.Duration{"b": 90 * time.Second}, 2))
		whole := store.NewRunSlow(basis, thresholds, 5, []int64{ins[0].ID}, 1)
		require.True(t, whole.Answers(thresholds, 100), "every slow job is in it")
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			return store.KeepSlow(ctx, st, tx, run, whole)
		}))
		_, kept, err = store.KeptSlow(ctx, db, run)
		require.NoError(t, err)
		require.Equal(t, &page, kept, "nothing kept from inside a transaction")

		// Run again: the job finishes later, and the same counts are kept.
		require.NoError(t, db.Exec("UPDATE sheaf_runs SET counts = NULL WHERE run_id = ?", run).Error)
		finish(t, st, db, ins[3].ID, "COMPLETED", at.Add(time.Hour))
		n, err = store.KeepRunCounts(ctx, st, db, 10)
		require.NoError(t, err)
		require.Len(t, n, 1)
		later, kept, err := store.KeptSlow(ctx, db, run)
		require.NoError(t, err)
		require.NotEqual(t, basis, later)
		require.Nil(t, kept, "found before the run changed")

		require.NoError(t, db.Exec("UPDATE sheaf_runs SET slow = '[1]' WHERE run_id = ?", run).Error)
		_, _, err = store.KeptSlow(ctx, db, run)
		require.ErrorContains(t, err, `run "night": kept slow jobs`)
	})
}
