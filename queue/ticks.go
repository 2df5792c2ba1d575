package queue

// The tick ledger: what became of every expected tick of a schedule.

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// TickOutcome is what became of a schedule's tick, as the ledger records
// it.
type TickOutcome string

const (
	// TickFired: the tick created its jobs within its schedule's grace.
	TickFired TickOutcome = store.TickFired
	// TickLate: the tick created its jobs more than its grace after its
	// time: caught up by a runner that started late (CatchUp), or fired
	// once the database could be reached again.
	TickLate TickOutcome = store.TickLate
	// TickMissed: no runner ran at the tick, and its schedule's policy
	// skipped it.
	TickMissed TickOutcome = store.TickMissed
)

// TickRecord is a tick in the ledger. A runner writes it in the transaction
// that creates the tick's jobs, or that skips the tick; a tick that no
// runner has reached yet (every runner down) has none.
type TickRecord struct {
	// Tick is the tick: At is in its schedule's location if the schedule
	// is registered, UTC if not; RunID names its jobs' run (a missed
	// tick's would-be run).
	Tick
	Outcome TickOutcome
	// RecordedAt is when a runner recorded it, by that runner's clock.
	RecordedAt time.Time
	// Jobs is how many jobs the tick created: 0 for a missed tick, and for
	// a fired one whose Jobs function returned none or whose jobs could
	// not be built.
	Jobs int
}

// TicksQuery selects ledger rows for Client.Ticks. Zero fields select
// everything.
type TicksQuery struct {
	// Schedule keeps one schedule's ticks.
	Schedule string
	// From (inclusive) and To (exclusive) bound the ticks' times.
	From, To time.Time
	// Outcome keeps the ticks of one outcome.
	Outcome TickOutcome
	// After continues a listing after this record, the last of the
	// previous page: only its Schedule and At are read.
	After *TickRecord
	// Limit caps the records returned; 0 means 100, the most is 10,000.
	Limit int
}

// Ticks lists the ledger's ticks that q selects, newest first (then by
// schedule name, descending). The ledger keeps each schedule's ticks for
// 400 days; a runner deletes older ones as it fires the schedule. It reads
// through an index on the ticks' time.
func (c *ops) Ticks(ctx context.Context, q TicksQuery) ([]TickRecord, error) {
	page := operate.TicksPage{Schedule: q.Schedule, Outcome: string(q.Outcome), From: q.From, To: q.To, Limit: q.Limit, After: q.After != nil}
	if q.After != nil {
		page.AfterSchedule, page.AfterAt = q.After.Schedule, q.After.At
	}
	sq, err := page.Store()
	if err != nil {
		return nil, err
	}
	return c.ticks(ctx, sq)
}

// ticks reads the ledger rows q selects as records.
func (c *ops) ticks(ctx context.Context, q store.TicksQuery) ([]TickRecord, error) {
	rows, err := store.Ticks(ctx, c.st, c.db, q)
	if err != nil {
		return nil, fmt.Errorf("queue: ticks: %w", check.NotMigrated(err))
	}
	timings := c.reg.timings()
	return converted(rows, func(r store.TickRow) TickRecord {
		return TickRecord{Tick: Tick(operate.LedgerTick(timings[r.Schedule], r)), Outcome: TickOutcome(r.Outcome),
			RecordedAt: r.RecordedAt, Jobs: r.Jobs}
	}), nil
}

// Clock returns the clock the client goes by (WithClock; SystemClock{} by
// default), for tools such as queue/console that show schedules and
// windows as of the same now.
func (c *ops) Clock() Clock { return c.cfg.clock }
