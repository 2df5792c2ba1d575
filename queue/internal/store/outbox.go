package store

// The outbox of package queue/bridge (schema version 13): triggers on the
// jobs table write one row per lifecycle event in the transaction of the
// change, whatever statement or process makes it; the relay reads the rows
// in ID order and deletes each once its broker acknowledged it. A job's
// events are in ID order: the row lock on the job orders the transactions
// that change it, so a later event's row is inserted after the earlier
// one's committed.

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// The events the outbox records.
const (
	EventCreated   = "created"   // inserted
	EventRetrying  = "retrying"  // back to QUEUED after a failed (or rescued) attempt, or retried by hand
	EventCompleted = "completed" // COMPLETED
	EventFailed    = "failed"    // FAILED: no attempt left, or failed for good
	EventCancelled = "cancelled" // CANCELLED
	EventStarted   = "started"   // PROCESSING: an attempt began (only while asked for: see EnableOutbox)
)

// OutboxTable holds the events not yet published.
const OutboxTable = "sheaf_outbox"

// OutboxEvent is one row of the outbox.
type OutboxEvent struct {
	ID                    int64 // the event's identity: never reused
	JobID                 int64
	Event                 string
	Kind, Queue           string
	Attempts, MaxAttempts int
	Error                 string // the job's last error, for retrying and failed
	CorrelationID, RunID  string
	Meta                  []byte // the job's metadata, as EncodeMetadata wrote it
	At                    time.Time
}

// outboxChanged says when a job's change of status is an event, in terms
// of the aliases of its row before and after: a job changes status to
// PROCESSING (a claim) without an event, and a running job put back
// uncharged (its attempt taken back, as a stopping runner does) is no
// retry.
func outboxChanged(before, after string) string {
	return strings.NewReplacer("OLD.", before+".", "NEW.", after+".").Replace(`OLD.status <> NEW.status AND NEW.status <> 'PROCESSING'
	AND NOT (OLD.status = 'PROCESSING' AND NEW.status = 'QUEUED' AND NEW.attempts < OLD.attempts)`)
}

// On PostgreSQL the triggers are statement-level, with the statement's
// rows in transition tables: one INSERT ... SELECT writes the events of a
// whole claim, completion or bulk insert, where a row-level trigger would
// call its function, and run its INSERT, once per row; that was most of
// what the outbox cost a busy queue. The functions are created with the
// triggers, under names of their own: schema version 13's
// sheaf_outbox_write, which row-level triggers of earlier releases call,
// stays as it is. JIT is off in them: the planner knows nothing of a
// transition table's rows, guesses a join of a large statement's two to
// be huge, and would compile it, at a cost of a tenth of a second. So are
// nested loops (pgOutboxSettings): a function's statement has no
// parameters, so PL/pgSQL plans it once per connection, for the row counts
// of the first statement that fired the trigger there, and keeps that plan.
// A first claim or completion of one job made it a nested loop over the two
// transition tables, which a later one of 5,000 jobs then ran in 5 s
// instead of 0.1 s: a hash or merge join costs as little for one row and
// stays linear.
var pgOutboxOn = append(slices.Clone(pgOutboxFunctions), `CREATE TRIGGER sheaf_outbox_created AFTER INSERT ON sheaf_jobs REFERENCING NEW TABLE AS sheaf_new
	FOR EACH STATEMENT EXECUTE FUNCTION sheaf_outbox_inserted()`,
	// A transition table cannot go with a column list (UPDATE OF status):
	// every update of jobs runs the function, which finds no event in most
	// (claims, lease renewals) at the cost of one empty join.
	`CREATE TRIGGER sheaf_outbox_changed AFTER UPDATE ON sheaf_jobs REFERENCING OLD TABLE AS sheaf_old NEW TABLE AS sheaf_new
	FOR EACH STATEMENT EXECUTE FUNCTION sheaf_outbox_updated()`)

// pgOutboxSettings are the settings of the outbox's functions on
// PostgreSQL; outboxState finds functions without the last one stale.
const pgOutboxSettings = "SET jit = off SET enable_nestloop = off"

// pgOutboxFunctions are the functions of the triggers: those of the
// lifecycle events, and that of started events, which is created with them
// so that an update of the functions reaches it too.
var pgOutboxFunctions = []string{
	`CREATE OR REPLACE FUNCTION sheaf_outbox_inserted() RETURNS trigger LANGUAGE plpgsql ` + pgOutboxSettings + ` AS $$
BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT n.id, 'created', n.kind, n.queue, n.attempts, n.max_attempts, NULL, n.correlation_id, n.run_id, n.meta
	FROM sheaf_new n;
	RETURN NULL;
END $$`,
	`CREATE OR REPLACE FUNCTION sheaf_outbox_updated() RETURNS trigger LANGUAGE plpgsql ` + pgOutboxSettings + ` AS $$
BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT n.id, CASE n.status WHEN 'QUEUED' THEN 'retrying' ELSE lower(n.status) END, n.kind, n.queue, n.attempts,
		n.max_attempts, CASE WHEN n.status IN ('QUEUED', 'FAILED') THEN n.last_error END, n.correlation_id, n.run_id, n.meta
	FROM sheaf_new n JOIN sheaf_old o ON o.id = n.id
	WHERE ` + outboxChanged("o", "n") + `;
	RETURN NULL;
END $$`,
	`CREATE OR REPLACE FUNCTION sheaf_outbox_claimed() RETURNS trigger LANGUAGE plpgsql ` + pgOutboxSettings + ` AS $$
BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT n.id, 'started', n.kind, n.queue, n.attempts, n.max_attempts, NULL, n.correlation_id, n.run_id, n.meta
	FROM sheaf_new n JOIN sheaf_old o ON o.id = n.id
	WHERE ` + outboxStartedWhen("o", "n") + `;
	RETURN NULL;
END $$`,
}

const sqliteOutboxColumns = `NEW.kind, NEW.queue, NEW.attempts, NEW.max_attempts, %s, NEW.correlation_id, NEW.run_id, NEW.meta`

var sqliteOutboxOn = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_created AFTER INSERT ON sheaf_jobs BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'created', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `);
END`,
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_changed AFTER UPDATE OF status ON sheaf_jobs WHEN ` + outboxChanged("OLD", "NEW") + ` BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, CASE NEW.status WHEN 'QUEUED' THEN 'retrying' ELSE lower(NEW.status) END, ` +
		fmt.Sprintf(sqliteOutboxColumns, "CASE WHEN NEW.status IN ('QUEUED', 'FAILED') THEN NEW.last_error END") + `);
END`,
}

// The started trigger is apart from the others: it writes a row per claimed
// job, a cost only those who asked for the event pay.
func outboxStartedWhen(before, after string) string {
	return before + ".status <> 'PROCESSING' AND " + after + ".status = 'PROCESSING'"
}

var pgOutboxStarted = []string{
	`DROP TRIGGER IF EXISTS sheaf_outbox_started ON sheaf_jobs`,
	`CREATE TRIGGER sheaf_outbox_started AFTER UPDATE ON sheaf_jobs REFERENCING OLD TABLE AS sheaf_old NEW TABLE AS sheaf_new
	FOR EACH STATEMENT EXECUTE FUNCTION sheaf_outbox_claimed()`,
}

var sqliteOutboxStarted = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_started AFTER UPDATE OF status ON sheaf_jobs WHEN ` + outboxStartedWhen("OLD", "NEW") + ` BEGIN
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'started', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `);
END`,
}

// mysqlOutboxOn are SQLite's triggers in MariaDB's words: a trigger's
// body is one statement, and a condition is the WHERE of an INSERT ...
// SELECT.
var mysqlOutboxOn = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_created AFTER INSERT ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	VALUES (NEW.id, 'created', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `)`,
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_changed AFTER UPDATE ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT NEW.id, CASE NEW.status WHEN 'QUEUED' THEN 'retrying' ELSE lower(NEW.status) END, ` +
		fmt.Sprintf(sqliteOutboxColumns, "CASE WHEN NEW.status IN ('QUEUED', 'FAILED') THEN NEW.last_error END") + `
	FROM DUAL WHERE ` + outboxChanged("OLD", "NEW"),
}

var mysqlOutboxStarted = []string{
	`CREATE TRIGGER IF NOT EXISTS sheaf_outbox_started AFTER UPDATE ON sheaf_jobs FOR EACH ROW
	INSERT INTO sheaf_outbox (job_id, event, kind, queue, attempts, max_attempts, error, correlation_id, run_id, meta)
	SELECT NEW.id, 'started', ` + fmt.Sprintf(sqliteOutboxColumns, "NULL") + `
	FROM DUAL WHERE ` + outboxStartedWhen("OLD", "NEW"),
}

var outboxOff = []string{"DROP TRIGGER IF EXISTS sheaf_outbox_created", "DROP TRIGGER IF EXISTS sheaf_outbox_changed",
	"DROP TRIGGER IF EXISTS sheaf_outbox_started"}

// outboxLockTimeout bounds the wait of EnableOutbox and DisableOutbox for
// the lock that creating a trigger takes on the jobs table, which waits
// for every transaction that wrote jobs to end.
const outboxLockTimeout = "10s"

// EnableOutbox makes every lifecycle change of a job, from any process,
// write its event to the outbox, from the commit of this call on, and each
// claim too when started is true. It does nothing when the outbox records
// those events already; it never stops the recording of started events
// (DisableOutbox does). On PostgreSQL it replaces the row-level triggers of
// earlier releases with this one's, and functions of earlier releases
// without this one's settings (see pgOutboxOn).
func EnableOutbox(ctx context.Context, st Store, db *gorm.DB, started bool) error {
	s, err := outboxState(ctx, st, db)
	if err != nil || (s.on && !s.perRow && !s.stale && (s.started || !started)) {
		return err
	}
	started = started || s.started
	pg, lite, liteStarted := pgOutboxOn, sqliteOutboxOn, sqliteOutboxStarted
	if st.Dialect() == "mysql" {
		lite, liteStarted = mysqlOutboxOn, mysqlOutboxStarted
	}
	keep := s.on && !s.perRow
	if keep {
		// The triggers stay; stale functions are replaced in place.
		pg, lite = nil, nil
		if s.stale {
			pg = pgOutboxFunctions
		}
	}
	if started {
		pg, lite = append(slices.Clone(pg), pgOutboxStarted...), append(slices.Clone(lite), liteStarted...)
	}
	return setOutbox(ctx, st, db, pg, lite, keep)
}

// DisableOutbox stops the writing of events; the outbox keeps those it
// holds.
func DisableOutbox(ctx context.Context, st Store, db *gorm.DB) error {
	off := make([]string, len(outboxOff))
	for i, s := range outboxOff {
		off[i] = s + " ON sheaf_jobs"
	}
	return setOutbox(ctx, st, db, off, outboxOff, false)
}

// setOutbox runs the statements of st's dialect. keep says the outbox's
// triggers stay as they are apart from what the statements do; otherwise
// they are dropped first on PostgreSQL, whose CREATE TRIGGER has no IF NOT
// EXISTS.
func setOutbox(ctx context.Context, st Store, db *gorm.DB, pg, lite []string, keep bool) error {
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		stmts := lite
		if st.Dialect() == "postgres" {
			stmts = pg
			// Two processes that enable at once take turns; the second
			// then finds the triggers.
			if err := tx.Exec("SET LOCAL lock_timeout = '" + outboxLockTimeout + "'").Error; err != nil {
				return err
			}
			if err := tx.Exec("LOCK TABLE sheaf_jobs IN SHARE ROW EXCLUSIVE MODE").Error; err != nil {
				return fmt.Errorf("lock the jobs table: %w", err)
			}
			if !keep {
				if err := tx.Exec(outboxOff[0] + " ON sheaf_jobs; " + outboxOff[1] + " ON sheaf_jobs").Error; err != nil {
					return err
				}
			}
		}
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// OutboxOn reports whether the outbox's triggers exist.
func OutboxOn(ctx context.Context, st Store, db *gorm.DB) (bool, error) {
	s, err := outboxState(ctx, st, db)
	return s.on, err
}

// outboxTriggers is which of the outbox's triggers exist.
type outboxTriggers struct {
	on      bool // those of the lifecycle events
	started bool // that of started events
	perRow  bool // on PostgreSQL, one is row-level, as earlier releases made them
	stale   bool // on PostgreSQL, one calls a function without this release's settings
}

func outboxState(ctx context.Context, st Store, db *gorm.DB) (outboxTriggers, error) {
	q := `SELECT name, false, false FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'sheaf_outbox_%'`
	if st.Dialect() == "mysql" {
		q = `SELECT trigger_name, false, false FROM information_schema.triggers WHERE trigger_schema = DATABASE()
			AND trigger_name LIKE 'sheaf_outbox_%'`
	}
	if st.Dialect() == "postgres" {
		// Bit 0 of tgtype is TRIGGER_TYPE_ROW.
		q = `SELECT t.tgname, t.tgtype & 1 = 1, NOT coalesce('enable_nestloop=off' = ANY(p.proconfig), false)
			FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
			WHERE t.tgrelid = 'sheaf_jobs'::regclass AND t.tgname LIKE 'sheaf_outbox_%'`
	}
	rows, err := db.WithContext(ctx).Raw(q).Rows()
	if err != nil {
		return outboxTriggers{}, err
	}
	defer rows.Close()
	var s outboxTriggers
	var created, changed bool
	for rows.Next() {
		var name string
		var perRow, stale bool
		if err := rows.Scan(&name, &perRow, &stale); err != nil {
			return outboxTriggers{}, err
		}
		s.perRow, s.stale = s.perRow || perRow, s.stale || stale
		switch name {
		case "sheaf_outbox_created":
			created = true
		case "sheaf_outbox_changed":
			changed = true
		case "sheaf_outbox_started":
			s.started = true
		}
	}
	s.on = created && changed
	return s, rows.Err()
}

// OutboxEvents reads the first limit events of the outbox, in ID order,
// on db's pool (not in a transaction).
func OutboxEvents(ctx context.Context, db *gorm.DB, limit int) ([]OutboxEvent, error) {
	var c OutboxCursor
	return c.Read(ctx, nil, db, limit)
}

// OutboxCursor reads the outbox on from the highest ID it has read, and
// again only the IDs below that which may still hold an event, rather than
// from the start. The relay deletes from the start of the outbox's ID
// index, and the entries of deleted rows stay in the index until the table
// is vacuumed (once a minute at most, by default): a read from the start
// steps over every one of them, a millisecond per ten thousand, and a busy
// queue deletes that many in a second.
//
// An ID is dropped only once no event will ever have it but those already
// deleted. Events do not commit in ID order: a transaction that took ID 5
// may commit after one that took ID 6 was read. Dropping 5 then would lose
// its event, and the job's next event, with a higher ID, would go out
// first. So an ID below the highest read that a read did not find is a
// gap, read again by every later read until it can be dropped. On
// PostgreSQL a gap keeps the snapshot of the read that found it: the IDs
// below the highest it saw were all taken before it, by transactions that
// had their transaction ID (the triggers write the events, after the job's
// row; and the identity's sequence hands out IDs one at a time, without a
// cache); once every transaction of that snapshot has ended (a later
// snapshot's xmin reaches its xmax), a read that does not find the gap
// either drops it. A long transaction anywhere on the server holds gaps
// back, which then cost each read one look in the index apiece, not a walk
// over the deleted rows. SQLite commits one writer at a time, so every
// snapshot has ended by the next read. On MariaDB, whose snapshots do not
// tell, the cursor stays at the start.
//
// An event read and not deleted (its broker did not acknowledge it) stays
// open too, and is read again before any event above the highest ID: the
// events held back take their place in the batch.
//
// The zero OutboxCursor reads from the start; it is for one reader at a
// time.
type OutboxCursor struct {
	hi   int64        // every ID up to hi was deleted, or is in open
	open []outboxSpan // IDs up to hi to read again, in order
	// Of the last Read: its snapshot's xmin and xmax, the spans it read
	// again and how many events it asked for above hi, and its events' IDs.
	xmin, xmax int64
	asked      []outboxSpan
	above      int
	seen       []int64
}

// outboxSpan is a run of IDs to read again: an event read and not deleted
// (held), or IDs no read found, which may yet commit until the
// transactions below xmax have ended.
type outboxSpan struct {
	lo, hi int64
	held   bool
	xmax   int64
}

// outboxColumns are what a read of the outbox returns of each event, none
// of them NULL but meta, so that they scan into plain Go values.
const outboxColumns = `id, job_id, event, kind, queue, attempts, max_attempts,
	coalesce(error, ''), coalesce(correlation_id, ''), coalesce(run_id, ''), meta, at`

// readOutboxSQL reads the read's snapshot, in a row of its own whose ID is
// 0, the events within the spans from $1 to $2 (arrays of the same length),
// and the first $4 events after $3. They are apart, rather than joined,
// so that the events come in the index's order without a sort of the rows,
// a tenth of a millisecond per hundred.
const readOutboxSQL = `SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint,
	0::bigint, 0::bigint, '', '', '', 0, 0, '', '', '', NULL::bytea, now()
FROM pg_current_snapshot() s
UNION ALL
(SELECT 0, 0, o.* FROM unnest($1::bigint[], $2::bigint[]) r (lo, hi)
	CROSS JOIN LATERAL (SELECT ` + outboxColumns + ` FROM sheaf_outbox WHERE id BETWEEN r.lo AND r.hi) o)
UNION ALL
(SELECT 0, 0, ` + outboxColumns + ` FROM sheaf_outbox WHERE id > $3 ORDER BY id LIMIT $4)`

// Read reads the next limit events in ID order, on db's pool (not in a
// transaction): those held back and in gaps below the highest ID read
// first, then those above it. st may be nil for a read from the start on
// any store.
func (c *OutboxCursor) Read(ctx context.Context, st Store, db *gorm.DB, limit int) ([]OutboxEvent, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if st != nil && st.Dialect() == "mysql" {
		c.hi, c.open = 0, nil // the cursor stays at the start
	}
	c.asked = append(c.asked[:0], c.open...)
	held := 0
	for _, sp := range c.open {
		if sp.held {
			held += int(sp.hi - sp.lo + 1)
		}
	}
	c.above, c.xmin, c.xmax = max(0, limit-held), 0, 0
	var out []OutboxEvent
	if st != nil && st.Dialect() == "postgres" {
		out, err = c.readPostgres(ctx, sqlDB)
	} else {
		// Other stores delete rows for good, so a read from the first
		// span on steps over none. The numbers are formatted in: the
		// stores' placeholders differ.
		after := c.hi
		if len(c.open) > 0 {
			after = c.open[0].lo - 1
		}
		var rows *sql.Rows
		rows, err = sqlDB.QueryContext(ctx, fmt.Sprintf(`SELECT 0, 0, %s FROM sheaf_outbox WHERE id > %d ORDER BY id LIMIT %d`,
			outboxColumns, after, held+c.above))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var at sqlTime
		out, err = c.scan(rows, limit, &at, func() time.Time { return at.t })
	}
	if err != nil {
		return nil, err
	}
	// UNION ALL keeps its branches' order on PostgreSQL, which SQL does
	// not promise.
	byID := func(a, b OutboxEvent) int { return cmp.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(out, byID) {
		slices.SortFunc(out, byID)
	}
	c.seen = c.seen[:0]
	for _, e := range out {
		c.seen = append(c.seen, e.ID)
	}
	return out, nil
}

// readPostgres reads with readOutboxSQL, through pgx's own rows when the
// driver is pgx: database/sql's turn every column into a value of its own
// and convert that again, which cost the relay as much CPU time as the
// rest of its work on an event.
func (c *OutboxCursor) readPostgres(ctx context.Context, sqlDB *sql.DB) ([]OutboxEvent, error) {
	los, his := make([]int64, len(c.asked)), make([]int64, len(c.asked))
	for i, sp := range c.asked {
		los[i], his[i] = sp.lo, sp.hi
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []OutboxEvent
	native := false
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return nil
		}
		native = true
		rows, err := sc.Conn().Query(ctx, readOutboxSQL, los, his, c.hi, c.above)
		if err != nil {
			return err
		}
		defer rows.Close()
		var at time.Time
		out, err = c.scan(rows, c.above, &at, func() time.Time { return at })
		return err
	})
	if native || err != nil {
		return out, err
	}
	rows, err := conn.QueryContext(ctx, readOutboxSQL, los, his, c.hi, c.above)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var at sqlTime
	return c.scan(rows, c.above, &at, func() time.Time { return at.t })
}

// scan reads the rows of a read of the outbox, and its snapshot's row if
// it has one, scanning each row's time into at, which atTime reads.
func (c *OutboxCursor) scan(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}, limit int, at any, atTime func() time.Time) ([]OutboxEvent, error) {
	out := make([]OutboxEvent, 0, min(limit, 256))
	var e OutboxEvent
	var xmin, xmax int64
	dest := []any{&xmin, &xmax, &e.ID, &e.JobID, &e.Event, &e.Kind, &e.Queue, &e.Attempts, &e.MaxAttempts,
		&e.Error, &e.CorrelationID, &e.RunID, &e.Meta, at}
	for rows.Next() {
		e = OutboxEvent{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if e.ID == 0 {
			c.xmin, c.xmax = xmin, xmax // the snapshot's row
			continue
		}
		e.At = atTime()
		out = append(out, e)
	}
	return out, rows.Err()
}

// Deleted tells the cursor which events of the last Read were deleted: the
// others are held, to be read again. It drops the gaps that the read did
// not find once no transaction can fill them, and keeps the rest.
func (c *OutboxCursor) Deleted(ids []int64) {
	deleted := make(map[int64]bool, len(ids))
	for _, id := range ids {
		deleted[id] = true
	}
	var open []outboxSpan
	add := func(sp outboxSpan) {
		if n := len(open); n > 0 && open[n-1].hi+1 == sp.lo && open[n-1].held == sp.held && open[n-1].xmax == sp.xmax {
			open[n-1].hi = sp.hi
			return
		}
		open = append(open, sp)
	}
	// each walks the span from lo to hi: a gap around each event found in
	// it (while the gap may still fill, as settled says), and each event
	// not deleted held.
	each := func(lo, hi, xmax int64, settled bool) {
		i, _ := slices.BinarySearch(c.seen, lo)
		for ; i < len(c.seen) && c.seen[i] <= hi; i++ {
			id := c.seen[i]
			if lo < id && !settled {
				add(outboxSpan{lo: lo, hi: id - 1, xmax: xmax})
			}
			if !deleted[id] {
				add(outboxSpan{lo: id, hi: id, held: true})
			}
			lo = id + 1
		}
		if lo <= hi && !settled {
			add(outboxSpan{lo: lo, hi: hi, xmax: xmax})
		}
	}
	for _, sp := range c.asked {
		// A held event the read did not find is gone: read no more.
		each(sp.lo, sp.hi, sp.xmax, sp.held || c.xmin >= sp.xmax)
	}
	if n := len(c.seen); n > 0 && c.seen[n-1] > c.hi {
		each(c.hi+1, c.seen[n-1], c.xmax, false)
		c.hi = c.seen[n-1]
	}
	c.open = open
}

// DeleteOutbox deletes the events ids names: those their broker
// acknowledged. IDs that are a run without a gap, as a batch's usually
// are, are deleted as a range, which the ID index reaches in one descent
// instead of one per ID: no other event can have an ID within the run.
// On PostgreSQL other IDs are bound as one array, so the statement's text
// and plan are the same for every batch.
func DeleteOutbox(ctx context.Context, st Store, db *gorm.DB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	first, last := sorted[0], sorted[len(sorted)-1]
	run := last-first == int64(len(sorted)-1)
	if st.Dialect() == "postgres" {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		if run {
			_, err = sqlDB.ExecContext(ctx, "DELETE FROM sheaf_outbox WHERE id BETWEEN $1 AND $2", first, last)
		} else {
			_, err = sqlDB.ExecContext(ctx, "DELETE FROM sheaf_outbox WHERE id = ANY($1)", ids)
		}
		return err
	}
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		if run {
			return tx.Exec("DELETE FROM sheaf_outbox WHERE id BETWEEN ? AND ?", first, last).Error
		}
		return tx.Exec("DELETE FROM sheaf_outbox WHERE id IN ?", ids).Error
	})
}
