package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

type row struct {
	ID        int64
	Status    string
	Attempts  int
	Claims    int
	LastError *string
	LockedBy  *string
}

func (row) TableName() string { return store.JobsTable }

// insertJobs inserts jobs into the store's migrated schema.
func insertJobs(t *testing.T, st store.Store, db *gorm.DB, jobs ...store.NewJob) []row {
	t.Helper()
	var ins []row
	require.NoError(t, st.Insert(context.Background(), db, jobs, &ins))
	require.Len(t, ins, len(jobs))
	return ins
}

// A job's way through the runner's statements: claim, fail with a retry,
// claim again, renew, complete; a second job claimed and left to expire is
// rescued as a suspect, and claimed as one.
func TestRunnerStatements(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		ins := insertJobs(t, st, db,
			store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{"n":1}`},
			store.NewJob{Kind: "b", Queue: "q", Priority: 9, Attempts: 1, Payload: `{"n":2}`})
		a, b := ins[0].ID, ins[1].ID
		conn := st.Hold(false)
		defer conn.Close()

		got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 1, Lease: time.Minute, Runner: "r1"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, b, got[0].ID, "the higher priority first")
		require.JSONEq(t, `{"n":2}`, string(got[0].Payload))
		require.Equal(t, 1, got[0].Attempts)
		bKey := store.Key(b, got[0].Claims)

		got, err = conn.Claim(ctx, store.Claim{Queue: "q", N: 5, Lease: time.Minute, Runner: "r1"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		aKey := store.Key(a, got[0].Claims)

		failed, err := conn.Fail(ctx, store.Failures{IDs: []int64{a}, Keys: []int64{aKey}, Statuses: []string{"QUEUED"},
			Delays: []time.Duration{0}, Errors: []string{"boom"}})
		require.NoError(t, err)
		require.Equal(t, []int64{a}, failed)
		landed, err := conn.FailLanded(ctx, store.Failures{IDs: []int64{a}, Keys: []int64{aKey}, Statuses: []string{"QUEUED"},
			Delays: []time.Duration{0}, Errors: []string{"boom"}})
		require.NoError(t, err)
		require.Equal(t, []int64{a}, landed)

		got, err = conn.Claim(ctx, store.Claim{Queue: "q", N: 5, Lease: time.Minute, Runner: "r1"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, 2, got[0].Attempts)
		aKey = store.Key(a, got[0].Claims)

		renewed, orphans, err := conn.Renew(ctx, time.Minute, []int64{a}, []int64{aKey}, "r1")
		require.NoError(t, err)
		require.Equal(t, []int64{aKey}, renewed)
		require.Equal(t, []int64{bKey}, orphans, "b is locked in r1's name but not among its claims")

		done, err := conn.Complete(ctx, []int64{a}, []int64{aKey})
		require.NoError(t, err)
		require.Equal(t, []int64{a}, done)
		done, err = conn.Complete(ctx, []int64{a}, []int64{aKey})
		require.NoError(t, err)
		require.Empty(t, done, "a completion lands once")
		landed, err = conn.CompleteLanded(ctx, []int64{a}, []int64{aKey})
		require.NoError(t, err)
		require.Equal(t, []int64{a}, landed)

		// b's lease runs out: renew it to a moment ago.
		_, _, err = conn.Renew(ctx, -time.Second, []int64{b}, []int64{bKey}, "r1")
		require.NoError(t, err)
		rescued, err := st.Rescue(ctx, "r2")
		require.NoError(t, err)
		require.Len(t, rescued, 1)
		require.Equal(t, b, rescued[0].ID)
		require.Equal(t, "r1", rescued[0].LostBy)
		require.Equal(t, "QUEUED", rescued[0].Status)
		require.Equal(t, 0, rescued[0].Attempts, "a rescued attempt is uncounted")

		none, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 5, Lease: time.Minute, Runner: "r2"})
		require.NoError(t, err)
		require.Empty(t, none, "ordinary claims leave suspects alone")
		sus, err := conn.ClaimSuspect(ctx, []string{"q"}, time.Minute, "r2", nil)
		require.NoError(t, err)
		require.Len(t, sus, 1)
		attempts, _, err := st.StartSuspect(ctx, b, sus[0].Claims)
		require.NoError(t, err)
		require.Equal(t, 1, attempts)
		ok, err := st.SetProgress(ctx, b, sus[0].Claims, 5, 10)
		require.NoError(t, err)
		require.True(t, ok)
		put, err := st.Requeue(ctx, []int64{b}, []int64{store.Key(b, sus[0].Claims)}, []bool{true})
		require.NoError(t, err)
		require.Equal(t, []int64{b}, put)
		var rows []row
		require.NoError(t, st.Jobs(ctx, db, store.Filter{}, 0, &rows))
		require.Equal(t, "COMPLETED", rows[0].Status)
		require.Equal(t, "boom", *rows[0].LastError)
		require.Equal(t, "QUEUED", rows[1].Status)
		require.Equal(t, 0, rows[1].Attempts)
		require.Nil(t, rows[1].LockedBy)
	})
}

// CompleteTx completes a claim's job inside a caller's transaction, seen
// there at once and elsewhere once it commits; a renewal meanwhile passes
// the job's locked row by, counting it renewed, rather than wait for the
// transaction (PostgreSQL; on SQLite the transaction holds every writer).
func TestCompleteTxAndRenewalsMeanwhile(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		id := insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`})[0].ID
		conn := st.Hold(false)
		defer conn.Close()
		got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 1, Lease: time.Minute, Runner: "r1"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		claims := got[0].Claims
		key := store.Key(id, claims)

		state := func(db *gorm.DB) string {
			status, n, err := st.StateIn(db, id)
			require.NoError(t, err)
			require.Equal(t, claims, n)
			return status
		}
		renew := func() []int64 {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			renewed, orphans, err := conn.Renew(rctx, time.Minute, []int64{id}, []int64{key}, "r1")
			require.NoError(t, err, "the renewal did not wait for the transaction")
			require.Empty(t, orphans)
			return renewed
		}
		for _, commit := range []bool{false, true} {
			tx := db.Begin()
			require.NoError(t, tx.Error)
			_, _, completed, err := st.CompleteTx(tx, id, claims+1)
			require.NoError(t, err)
			require.False(t, completed, "another claim's completion changes nothing")
			_, _, completed, err = st.CompleteTx(tx, id, claims)
			require.NoError(t, err)
			require.True(t, completed)
			require.Equal(t, "COMPLETED", state(tx))
			require.Equal(t, "PROCESSING", state(db), "not before the commit")
			if st.Dialect() == "postgres" {
				require.Equal(t, []int64{key}, renew(), "still the runner's until the transaction commits")
			}
			if !commit {
				require.NoError(t, tx.Rollback().Error)
				require.Equal(t, "PROCESSING", state(db))
				require.Equal(t, []int64{key}, renew())
				continue
			}
			require.NoError(t, tx.Commit().Error)
			require.Equal(t, "COMPLETED", state(db))
			require.Empty(t, renew(), "completed: no longer the runner's")
		}
	})
}

// A claim whose job was put back (Requeue, as a stop out of time does while
// the handler still runs) writes nothing more: not while the job is QUEUED,
// and not once a later claim holds it PROCESSING. Every write of an attempt
// is guarded by status and claim number.
func TestAPutBackClaimWritesNothingMore(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		id := insertJobs(t, st, db, store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`})[0].ID
		conn := st.Hold(false)
		defer conn.Close()
		claim := func() int {
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 1, Lease: time.Minute, Runner: "r1"})
			require.NoError(t, err)
			require.Len(t, got, 1)
			return got[0].Claims
		}
		first := claim()
		put, err := st.Requeue(ctx, []int64{id}, []int64{store.Key(id, first)}, []bool{true})
		require.NoError(t, err)
		require.Equal(t, []int64{id}, put)

		// stale tries every write of the first claim and requires that none
		// changed the job.
		stale := func(when string) {
			key := store.Key(id, first)
			done, err := conn.Complete(ctx, []int64{id}, []int64{key})
			require.NoError(t, err)
			require.Empty(t, done, "completion, %s", when)
			failed, err := conn.Fail(ctx, store.Failures{IDs: []int64{id}, Keys: []int64{key}, Statuses: []string{"FAILED"},
				Delays: []time.Duration{0}, Errors: []string{"late"}, Runner: "r1"})
			require.NoError(t, err)
			require.Empty(t, failed, "failure, %s", when)
			changed, err := st.SetProgress(ctx, id, first, 1, 2)
			require.NoError(t, err)
			require.False(t, changed, "progress, %s", when)
			changed, err = st.SetOutput(ctx, id, first, `{"late":true}`)
			require.NoError(t, err)
			require.False(t, changed, "output, %s", when)
			require.NoError(t, db.Transaction(func(tx *gorm.DB) error {
				_, _, completed, err := st.CompleteTx(tx, id, first)
				require.False(t, completed, "completion in a transaction, %s", when)
				return err
			}))
		}
		stale("while the job is QUEUED")
		var r row
		require.NoError(t, db.First(&r, id).Error)
		require.Equal(t, "QUEUED", r.Status)
		require.Equal(t, 0, r.Attempts, "the put-back attempt is uncounted")

		second := claim()
		require.Equal(t, first+1, second)
		stale("while a later claim holds the job")
		require.NoError(t, db.First(&r, id).Error)
		require.Equal(t, "PROCESSING", r.Status)
		require.Equal(t, 1, r.Attempts)
		done, err := conn.Complete(ctx, []int64{id}, []int64{store.Key(id, second)})
		require.NoError(t, err)
		require.Equal(t, []int64{id}, done, "the later claim completes it")
	})
}

// A put-back of many claims (Requeue, as a stop out of time does) puts
// back at once the jobs no other transaction holds, though one of them is
// held: the held one waits, until the put-back's deadline, and only it is
// left PROCESSING.
func TestRequeuePassesAHeldRowBy(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() == "sqlite" {
			t.Skip("row locks (on SQLite, a writing transaction holds the whole database)")
		}
		requeuePassesAHeldRowBy(t, st, db)
	})
}

// claimTwoHoldOne claims two jobs, and locks the first's row in a
// transaction that ends with the test, or when the test rolls it back. It
// returns the claims' IDs and keys.
func claimTwoHoldOne(t *testing.T, st store.Store, db *gorm.DB) (ids, keys []int64, lock *gorm.DB) {
	ins := insertJobs(t, st, db,
		store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`},
		store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`})
	conn := st.Hold(false)
	defer conn.Close()
	got, err := conn.Claim(context.Background(), store.Claim{Queue: "q", N: 2, Lease: time.Minute, Runner: "r1"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, ins[0].ID, got[0].ID)
	ids, keys = []int64{got[0].ID, got[1].ID}, []int64{store.Key(got[0].ID, got[0].Claims), store.Key(got[1].ID, got[1].Claims)}
	lock = db.Begin()
	t.Cleanup(func() { lock.Rollback() })
	require.NoError(t, lock.Exec("SELECT id FROM sheaf_jobs WHERE id = ? FOR UPDATE", ids[0]).Error)
	return ids, keys, lock
}

func requeuePassesAHeldRowBy(t *testing.T, st store.Store, db *gorm.DB) {
	ctx := context.Background()
	ids, keys, lock := claimTwoHoldOne(t, st, db)
	held, free := ids[0], ids[1]
	status := func(id int64) string {
		var r row
		require.NoError(t, db.First(&r, id).Error)
		return r.Status
	}
	// waiting counts the statements that wait for the held row: on
	// PostgreSQL, those it blocks; MariaDB's put-back does not wait in the
	// server, so there, the statements running in the database (its
	// processlist is read live, unlike its lock waits, which it refreshes
	// only after 0.1 s without a reader).
	var holder int64
	pid, waiting := "SELECT pg_backend_pid()", "SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))"
	if st.Dialect() == "mysql" {
		pid, waiting = "SELECT CONNECTION_ID()", `SELECT count(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND command = 'Query' AND id NOT IN (?, CONNECTION_ID())`
	}
	require.NoError(t, lock.Raw(pid).Scan(&holder).Error)
	// Requeue's context ends once Requeue waits for the held row (on
	// MariaDB, once it has put the free one back), not after a fixed time,
	// which a loaded machine could spend on the free row.
	short, cancel := context.WithCancel(ctx)
	defer cancel()
	waits := func() (bool, error) {
		var n int64
		if st.Dialect() == "mysql" {
			var r row
			err := db.First(&r, free).Error
			return r.Status == "QUEUED", err
		}
		err := db.Raw(waiting, holder).Scan(&n).Error
		return n > 0, err
	}
	looked := make(chan error, 1)
	go func() {
		for short.Err() == nil {
			if ok, err := waits(); ok || err != nil {
				looked <- err
				cancel()
				return
			}
		}
		looked <- nil
	}()
	put, err := st.Requeue(short, ids, keys, []bool{true, true})
	cancel()
	require.NoError(t, <-looked)
	require.Error(t, err, "the held row is waited for until the context ends")
	require.Equal(t, []int64{free}, put)
	require.Equal(t, "QUEUED", status(free))
	require.Equal(t, "PROCESSING", status(held))

	// The put-back left no statement waiting for the row. On PostgreSQL,
	// the server ends the cancelled one when the cancel request arrives,
	// which, on a loaded machine, can be after Requeue returned.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int64
		require.NoError(t, db.Raw(waiting, holder).Scan(&n).Error)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements still wait for the held row after 30 s", n)
		}
		time.Sleep(5 * time.Millisecond) // a poll of the server's statements
	}
	require.NoError(t, lock.Rollback().Error)
	put, err = st.Requeue(ctx, ids, keys, []bool{true, true})
	require.NoError(t, err)
	require.Equal(t, []int64{held}, put)
	require.Equal(t, "QUEUED", status(held))
}

// A put-back puts back a held job once the transaction that held it ends,
// still within the put-back's context.
func TestRequeueWaitsForAHeldRow(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() == "sqlite" {
			t.Skip("row locks (on SQLite, a writing transaction holds the whole database)")
		}
		ctx := context.Background()
		ids, keys, lock := claimTwoHoldOne(t, st, db)
		held, free := ids[0], ids[1]
		type result struct {
			put []int64
			err error
		}
		done := make(chan result, 1)
		go func() {
			put, err := st.Requeue(ctx, ids, keys, []bool{true, false})
			done <- result{put, err}
		}()
		for {
			var r row
			require.NoError(t, db.First(&r, free).Error)
			if r.Status == "QUEUED" {
				break
			}
		}
		require.NoError(t, lock.Rollback().Error)
		res := <-done
		require.NoError(t, res.err)
		require.ElementsMatch(t, []int64{free, held}, res.put)
		var rows []row
		require.NoError(t, db.Order("id").Find(&rows, ids).Error)
		for _, r := range rows {
			require.Equal(t, "QUEUED", r.Status)
		}
		require.Equal(t, 0, rows[0].Attempts, "the counted attempt is uncounted")
		require.Equal(t, 1, rows[1].Attempts, "the attempt not counted stays")
	})
}

// A claim from a cursor continues after it in claim order (priority
// descending, run time, ID), into lower priorities once the cursor's runs
// out, and looks at higher priorities first only when asked.
func TestClaimFromACursor(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() == "sqlite" {
			t.Skip("SQLite claims from the start")
		}
		// A limit that never binds: a limited claim reads the queue as a
		// plain one does.
		_, err := st.SetLimit(context.Background(), db, store.Limit{Scope: store.ScopeQueue, Target: "limited", Concurrency: 1000})
		require.NoError(t, err)
		for _, queue := range []string{"plain", "limited"} {
			t.Run(queue, func(t *testing.T) {
				if queue == "limited" && st.Dialect() == "mysql" {
					// Its candidates are a statement of their own, and
					// the cursor's parts would be as many.
					t.Skip("MariaDB's limited claim reads the queue from its start")
				}
				claimFromACursor(t, st, db, queue)
			})
		}
	})
}

// claimFromACursor is TestClaimFromACursor on queue, whose claims are
// limited if it is "limited".
func claimFromACursor(t *testing.T, st store.Store, db *gorm.DB, queue string) {
	ctx := context.Background()
	job := func(p int) store.NewJob {
		return store.NewJob{Kind: "a", Queue: queue, Priority: p, Attempts: 3, Payload: `{}`}
	}
	ins := insertJobs(t, st, db, job(7), job(7), job(7), job(5), job(5), job(3))
	conn := st.Hold(false)
	defer conn.Close()
	limited := queue == "limited"
	claim := func(from store.Claimed, higher bool, n int) []int64 {
		got, err := conn.Claim(ctx, store.Claim{Queue: queue, N: n, Lease: time.Minute, Runner: "r1", Higher: higher, Limited: limited,
			From: &store.Cursor{Priority: from.Priority, RunAt: from.RunAt, ID: from.ID}})
		require.NoError(t, err)
		var ids []int64
		for _, j := range got {
			ids = append(ids, j.ID)
		}
		return ids
	}
	first, err := conn.Claim(ctx, store.Claim{Queue: queue, N: 2, Lease: time.Minute, Runner: "r1", Limited: limited})
	require.NoError(t, err)
	require.Len(t, first, 2)
	last := first[0]
	if first[1].ID > last.ID {
		last = first[1]
	}
	require.Equal(t, ins[1].ID, last.ID)
	// The first job goes back to the queue: it is behind the cursor.
	put, err := st.Requeue(ctx, []int64{ins[0].ID}, []int64{store.Key(ins[0].ID, 1)}, []bool{true})
	require.NoError(t, err)
	require.Equal(t, []int64{ins[0].ID}, put)
	require.ElementsMatch(t, []int64{ins[2].ID, ins[3].ID}, claim(last, false, 2), "onward, then the next priority")

	var p5 store.Claimed
	require.NoError(t, db.Raw("SELECT id, priority, run_at FROM sheaf_jobs WHERE id = ?", ins[3].ID).Scan(&p5).Error)
	high := insertJobs(t, st, db, job(9))[0].ID
	require.ElementsMatch(t, []int64{ins[4].ID}, claim(p5, false, 1), "without higher, the new job waits")
	p5.ID = ins[4].ID
	require.ElementsMatch(t, []int64{high, ins[0].ID, ins[5].ID}, claim(p5, true, 3),
		"higher first (the job put back among them), then onward and lower")
}

// A completion of many claims, one of which is no longer its claim's (put
// back), completes the others and says which; the put-back job stays
// QUEUED.
func TestCompleteCompletesTheClaimsStillHeld(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		job := store.NewJob{Kind: "a", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`}
		insertJobs(t, st, db, job, job, job)
		conn := st.Hold(false)
		defer conn.Close()
		got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 3, Lease: time.Minute, Runner: "r1"})
		require.NoError(t, err)
		require.Len(t, got, 3)
		var ids, keys []int64
		for _, j := range got {
			ids, keys = append(ids, j.ID), append(keys, store.Key(j.ID, j.Claims))
		}
		put, err := st.Requeue(ctx, ids[1:2], keys[1:2], []bool{true})
		require.NoError(t, err)
		require.Equal(t, ids[1:2], put)
		done, err := conn.Complete(ctx, ids, keys)
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{ids[0], ids[2]}, done)
		var rows []row
		require.NoError(t, db.Order("id").Find(&rows, ids).Error)
		statuses := map[int64]string{}
		for _, r := range rows {
			statuses[r.ID] = r.Status
		}
		require.Equal(t, map[int64]string{ids[0]: "COMPLETED", ids[1]: "QUEUED", ids[2]: "COMPLETED"}, statuses)
	})
}
