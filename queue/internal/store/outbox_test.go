package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// outboxed reads the outbox as "job:event" pairs, in ID order, and the IDs.
func outboxed(t *testing.T, db *gorm.DB, byID map[int64]string) (events []string, ids []int64) {
	t.Helper()
	rows, err := store.OutboxEvents(context.Background(), db, 100)
	require.NoError(t, err)
	for _, e := range rows {
		events = append(events, byID[e.JobID]+":"+e.Event)
		ids = append(ids, e.ID)
	}
	return events, ids
}

// With the outbox on, every lifecycle change writes its event, whichever
// statement makes it; a claim and an uncharged put-back write none; off,
// nothing is written. An event's ID is never reused, not even after the
// newest was deleted.
func TestOutboxRecordsLifecycleChanges(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		on, err := store.OutboxOn(ctx, st, db)
		require.NoError(t, err)
		require.False(t, on, "off until enabled")
		ins := insertJobs(t, st, db, store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`})
		events, _ := outboxed(t, db, nil)
		require.Empty(t, events, "nothing written while off")

		require.NoError(t, store.EnableOutbox(ctx, st, db, false))
		require.NoError(t, store.EnableOutbox(ctx, st, db, false), "enabling twice is enabling once")
		on, err = store.OutboxOn(ctx, st, db)
		require.NoError(t, err)
		require.True(t, on)

		meta := store.EncodeMetadata(map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
		var dest []row
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{
			{Kind: "a", Queue: "q", Priority: 9, Attempts: 2, Payload: `{}`, Metadata: meta},
			{Kind: "b", Queue: "q", Priority: 8, Attempts: 1, Payload: `{}`},
			{Kind: "c", Queue: "q", Priority: 7, Attempts: 1, Payload: `{}`},
		}, &dest))
		_, err = st.Copy(ctx, []store.NewJob{{Kind: "d", Queue: "other", Priority: 5, Attempts: 1, Payload: `{}`}})
		require.NoError(t, err)
		byID := map[int64]string{ins[0].ID: "old", dest[0].ID: "a", dest[1].ID: "b", dest[2].ID: "c", dest[2].ID + 1: "d"}

		conn := st.Hold(false)
		defer conn.Close()
		claim := func(n int) map[string]int64 {
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r"})
			require.NoError(t, err)
			keys := map[string]int64{}
			for _, c := range got {
				keys[byID[c.ID]] = store.Key(c.ID, c.Claims)
			}
			return keys
		}
		keys := claim(3)
		a, b, c := dest[0].ID, dest[1].ID, dest[2].ID
		_, err = conn.Fail(ctx, store.Failures{IDs: []int64{a, b}, Keys: []int64{keys["a"], keys["b"]}, Statuses: []string{"QUEUED", "FAILED"},
			Delays: []time.Duration{0, 0}, Errors: []string{"try again", "for good"}})
		require.NoError(t, err)
		put, err := conn.PutBack(ctx, []int64{keys["c"]}, "r")
		require.NoError(t, err)
		require.Len(t, put, 1)
		keys = claim(1)
		_, err = conn.Complete(ctx, []int64{a}, []int64{keys["a"]})
		require.NoError(t, err)
		require.NoError(t, st.Tx(ctx, db, func(tx *gorm.DB) error {
			_, err := st.CancelJobs(tx, store.Filter{IDs: []int64{c}}, 10)
			return err
		}))

		events, ids := outboxed(t, db, byID)
		require.Equal(t, []string{"a:created", "b:created", "c:created", "d:created", "a:retrying", "b:failed", "a:completed", "c:cancelled"}, events)
		all, err := store.OutboxEvents(ctx, db, 100)
		require.NoError(t, err)
		require.Equal(t, "a", all[0].Kind)
		require.Equal(t, 2, all[0].MaxAttempts)
		require.Equal(t, meta, all[0].Meta, "the job's trace context travels with its events")
		require.Equal(t, "try again", all[4].Error)
		require.Equal(t, "for good", all[5].Error)
		require.Empty(t, all[6].Error)
		require.WithinDuration(t, time.Now(), all[0].At, time.Minute)

		require.NoError(t, store.DeleteOutbox(ctx, st, db, ids[len(ids)-2:]))
		require.NoError(t, store.DisableOutbox(ctx, st, db))
		_, err = st.Copy(ctx, []store.NewJob{{Kind: "e", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}})
		require.NoError(t, err)
		after, _ := outboxed(t, db, byID)
		require.Equal(t, events[:len(events)-2], after, "off again: nothing written, and the rest kept")

		require.NoError(t, store.EnableOutbox(ctx, st, db, false))
		_, err = st.Copy(ctx, []store.NewJob{{Kind: "f", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}})
		require.NoError(t, err)
		_, newIDs := outboxed(t, db, byID)
		require.Greater(t, newIDs[len(newIDs)-1], ids[len(ids)-1], "a deleted event's ID is not given again")
	})
}

// Started events are recorded only once asked for: then each claim writes
// one per job, the lifecycle events go on as before, enabling again without
// them keeps them, and disabling stops them all.
func TestOutboxRecordsStartsOnlyWhenAsked(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		ins := insertJobs(t, st, db, store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`})
		byID := map[int64]string{ins[0].ID: "old"}
		conn := st.Hold(false)
		defer conn.Close()
		claimAndFail := func() {
			t.Helper()
			got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 1, Lease: time.Minute, Runner: "r"})
			require.NoError(t, err)
			require.Len(t, got, 1)
			_, err = conn.Fail(ctx, store.Failures{IDs: []int64{got[0].ID}, Keys: []int64{store.Key(got[0].ID, got[0].Claims)},
				Statuses: []string{"QUEUED"}, Delays: []time.Duration{0}, Errors: []string{"again"}})
			require.NoError(t, err)
		}

		require.NoError(t, store.EnableOutbox(ctx, st, db, false))
		claimAndFail()
		events, _ := outboxed(t, db, byID)
		require.Equal(t, []string{"old:retrying"}, events, "no started event unless asked")

		require.NoError(t, store.EnableOutbox(ctx, st, db, true))
		require.NoError(t, store.EnableOutbox(ctx, st, db, false), "enabling without starts keeps them")
		claimAndFail()
		events, _ = outboxed(t, db, byID)
		require.Equal(t, []string{"old:retrying", "old:started", "old:retrying"}, events)
		all, err := store.OutboxEvents(ctx, db, 100)
		require.NoError(t, err)
		require.Equal(t, 2, all[1].Attempts, "the started event carries the attempt it starts")
		require.Empty(t, all[1].Error)

		require.NoError(t, store.DisableOutbox(ctx, st, db))
		on, err := store.OutboxOn(ctx, st, db)
		require.NoError(t, err)
		require.False(t, on)
		claimAndFail()
		after, _ := outboxed(t, db, byID)
		require.Equal(t, events, after, "off: no event of any kind")
	})
}

// On PostgreSQL, enabling replaces the row-level triggers of earlier
// releases, the started one included, with statement-level ones, and each
// change still writes its event once.
func TestOutboxReplacesRowLevelTriggers(t *testing.T) {
	t.Parallel()
	st, db := migratedPostgres(t)
	ctx := context.Background()
	// As an earlier release made them.
	for _, s := range []string{
		`CREATE TRIGGER sheaf_outbox_created AFTER INSERT ON sheaf_jobs FOR EACH ROW EXECUTE FUNCTION sheaf_outbox_write()`,
		`CREATE TRIGGER sheaf_outbox_changed AFTER UPDATE OF status ON sheaf_jobs FOR EACH ROW
			WHEN (OLD.status <> NEW.status AND NEW.status <> 'PROCESSING') EXECUTE FUNCTION sheaf_outbox_write()`,
		`CREATE TRIGGER sheaf_outbox_started AFTER UPDATE OF status ON sheaf_jobs FOR EACH ROW
			WHEN (OLD.status <> 'PROCESSING' AND NEW.status = 'PROCESSING') EXECUTE FUNCTION sheaf_outbox_write()`,
	} {
		require.NoError(t, db.Exec(s).Error)
	}
	perRow := func() []string {
		var names []string
		require.NoError(t, db.Raw(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'sheaf_jobs'::regclass
			AND tgname LIKE 'sheaf_outbox_%' AND tgtype & 1 = 1 ORDER BY tgname`).Scan(&names).Error)
		return names
	}
	require.Len(t, perRow(), 3)

	require.NoError(t, store.EnableOutbox(ctx, st, db, false))
	require.Empty(t, perRow(), "every row-level trigger replaced")
	ins := insertJobs(t, st, db, store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`})
	conn := st.Hold(false)
	defer conn.Close()
	got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 1, Lease: time.Minute, Runner: "r"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = conn.Complete(ctx, []int64{got[0].ID}, []int64{store.Key(got[0].ID, got[0].Claims)})
	require.NoError(t, err)
	events, _ := outboxed(t, db, map[int64]string{ins[0].ID: "k"})
	require.Equal(t, []string{"k:created", "k:started", "k:completed"}, events, "the started events kept, each event once")
}

// On PostgreSQL a connection keeps the plan of a trigger function's
// statement from the first statement that fired it there: the plan of a
// change of one job must not be a nested loop over the transition tables,
// which a later change of thousands of jobs would run in quadratic time.
// Functions an earlier release made without that setting are replaced.
func TestOutboxPlansStayLinear(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	st, err := store.Open(pg.Gorm)
	require.NoError(t, err)
	ctx := context.Background()
	jobs := make([]store.NewJob, 2000)
	for i := range jobs {
		jobs[i] = store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}
	}
	_, err = st.Migrate(ctx)
	require.NoError(t, err)
	ins := insertJobs(t, st, pg.Gorm, jobs...)
	require.NoError(t, store.EnableOutbox(ctx, st, pg.Gorm, true))
	// As an earlier release made the functions.
	for _, f := range []string{"sheaf_outbox_inserted", "sheaf_outbox_updated", "sheaf_outbox_claimed"} {
		require.NoError(t, pg.Gorm.Exec("ALTER FUNCTION "+f+"() RESET enable_nestloop").Error)
	}
	require.NoError(t, store.EnableOutbox(ctx, st, pg.Gorm, false))
	var stale int64
	require.NoError(t, pg.Gorm.Raw(`SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
		AND proname LIKE 'sheaf_outbox_%' AND proname <> 'sheaf_outbox_write'
		AND NOT coalesce('enable_nestloop=off' = ANY(proconfig), false)`).Scan(&stale).Error)
	require.Zero(t, stale, "every function replaced")
	on, err := store.OutboxOn(ctx, st, pg.Gorm)
	require.NoError(t, err)
	require.True(t, on)

	// auto_explain sends the plans of the triggers' statements to this
	// connection.
	var mu sync.Mutex
	var plans []string
	cfg, err := pgx.ParseConfig(pg.DSN)
	require.NoError(t, err)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on", "SET client_min_messages = log"} {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, "UPDATE sheaf_jobs SET status = 'PROCESSING' WHERE id = $1", ins[0].ID)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "UPDATE sheaf_jobs SET status = 'CANCELLED' WHERE id = $1", ins[0].ID)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "UPDATE sheaf_jobs SET status = 'CANCELLED' WHERE status = 'QUEUED'")
	require.NoError(t, err)
	mu.Lock()
	var joins int
	for _, p := range plans {
		if strings.Contains(p, "sheaf_old") {
			joins++
			require.NotContains(t, p, "Nested Loop", p)
		}
	}
	mu.Unlock()
	require.Equal(t, 6, joins, "each update ran the functions of its two events")
	var events int64
	require.NoError(t, pg.Gorm.Raw("SELECT count(*) FROM sheaf_outbox WHERE event = 'cancelled'").Scan(&events).Error)
	require.EqualValues(t, len(jobs), events)
}

// cursorRounds returns a PostgreSQL store with its outbox on, and a round
// of a relay whose broker acknowledges everything: a cursor's next read,
// its events deleted, and their IDs.
func cursorRounds(t *testing.T) (store.Store, *gorm.DB, func() []int64) {
	st, db := migratedPostgres(t)
	ctx := context.Background()
	require.NoError(t, store.EnableOutbox(ctx, st, db, false))
	var cursor store.OutboxCursor
	return st, db, func() []int64 {
		t.Helper()
		events, err := cursor.Read(ctx, st, db, 100)
		require.NoError(t, err)
		var ids []int64
		for _, e := range events {
			ids = append(ids, e.ID)
		}
		require.NoError(t, store.DeleteOutbox(ctx, st, db, ids))
		cursor.Deleted(ids)
		return ids
	}
}

// A transaction left open elsewhere holds the cursor's gaps back, but not
// the events it deleted: those are not read again, and a gap is, until
// its event commits.
func TestOutboxCursorPassesDeletedEventsBesideALongTransaction(t *testing.T) {
	t.Parallel()
	st, db, round := cursorRounds(t)
	ctx := context.Background()
	job := store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}

	long := db.Begin()
	defer long.Rollback()
	require.NoError(t, long.Exec("SELECT pg_current_xact_id()").Error) // it has a transaction ID
	var dest []row
	require.NoError(t, st.Insert(ctx, db, []store.NewJob{job, job, job}, &dest))
	first := round()
	require.Len(t, first, 3)
	late := db.Begin()
	defer late.Rollback()
	require.NoError(t, st.Insert(ctx, late, []store.NewJob{job}, &dest))
	require.NoError(t, st.Insert(ctx, db, []store.NewJob{job}, &dest))
	require.Len(t, round(), 1, "the committed event, past the late one's gap")

	// An event put by hand at a deleted ID is not read: the cursor does
	// not read the deleted events again.
	require.NoError(t, db.Exec(`INSERT INTO sheaf_outbox (id, job_id, event, kind, queue, attempts, max_attempts)
		OVERRIDING SYSTEM VALUE VALUES (?, 1, 'created', 'k', 'q', 0, 1)`, first[1]).Error)
	for range 3 {
		require.Empty(t, round())
	}
	require.NoError(t, late.Commit().Error)
	got := round()
	require.Len(t, got, 1, "the late event is read")
	require.Greater(t, got[0], first[2])
}

// The cursor reads on from where every event was deleted, but never passes
// an event that commits after a later one was read: a transaction that
// took an ID and commits late still has its event read.
func TestOutboxCursorWaitsForLateCommits(t *testing.T) {
	t.Parallel()
	st, db, round := cursorRounds(t)
	ctx := context.Background()
	job := store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}

	late := db.Begin()
	defer late.Rollback()
	var dest []row
	require.NoError(t, st.Insert(ctx, late, []store.NewJob{job}, &dest))
	require.NoError(t, st.Insert(ctx, db, []store.NewJob{job}, &dest))
	first := round()
	require.Len(t, first, 1, "the committed event")
	for range 3 {
		require.Empty(t, round())
	}
	require.NoError(t, late.Commit().Error)
	got := round()
	require.Len(t, got, 1, "the late event is read")
	require.Less(t, got[0], first[0])

	// Once the transactions of its snapshots have ended (on a shared server,
	// those of other tests too), the cursor moves past what it deleted: an
	// event put below it by hand is not read.
	require.Eventually(t, func() bool {
		require.NoError(t, db.Exec(`INSERT INTO sheaf_outbox (id, job_id, event, kind, queue, attempts, max_attempts)
			OVERRIDING SYSTEM VALUE VALUES (?, 1, 'created', 'k', 'q', 0, 1)`, first[0]).Error)
		return len(round()) == 0
	}, 30*time.Second, 10*time.Millisecond, "the cursor reads from past the deleted events")
}

// Deleting events deletes those named and no other, whether their IDs
// are a run or have gaps.
func TestDeleteOutboxDeletesOnlyThoseNamed(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, store.EnableOutbox(ctx, st, db, false))
		var dest []row
		job := store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`}
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{job, job, job, job, job, job}, &dest))
		_, ids := outboxed(t, db, nil)
		require.Len(t, ids, 6)

		require.NoError(t, store.DeleteOutbox(ctx, st, db, []int64{ids[3], ids[0], ids[1]}), "with a gap")
		_, left := outboxed(t, db, nil)
		require.Equal(t, []int64{ids[2], ids[4], ids[5]}, left)
		require.NoError(t, store.DeleteOutbox(ctx, st, db, []int64{ids[5], ids[4]}), "a run")
		_, left = outboxed(t, db, nil)
		require.Equal(t, []int64{ids[2]}, left)
	})
}
