package queue

// The tick ledger: what became of every expected tick of a schedule.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	limit, err := pageLimit(q.Limit, 10_000)
	if err != nil {
		return nil, err
	}
	switch q.Outcome {
	case "", TickFired, TickLate, TickMissed:
	default:
		return nil, invalid("ticks: outcome %q is none of fired, late, missed", q.Outcome)
	}
	if err := checkText("TicksQuery.Schedule", q.Schedule); err != nil {
		return nil, err
	}
	sq := store.TicksQuery{From: q.From, To: q.To, Limit: limit}
	if q.Schedule != "" {
		sq.Schedules = []string{q.Schedule}
	}
	if q.Outcome != "" {
		sq.Outcomes = []string{string(q.Outcome)}
	}
	if q.After != nil {
		if q.After.At.IsZero() {
			return nil, invalid("TicksQuery.After has no At")
		}
		if err := checkText("TicksQuery.After.Schedule", q.After.Schedule); err != nil {
			return nil, err
		}
		sq.Before, sq.BeforeSchedule = q.After.At, q.After.Schedule
	}
	return c.ticks(ctx, sq)
}

// ticks reads the ledger rows q selects as records.
func (c *ops) ticks(ctx context.Context, q store.TicksQuery) ([]TickRecord, error) {
	rows, err := store.Ticks(ctx, c.st, c.db, q)
	if err != nil {
		return nil, fmt.Errorf("queue: ticks: %w", notMigrated(err))
	}
	scheds, _ := c.reg.schedules.Now()
	out := make([]TickRecord, 0, len(rows))
	for _, r := range rows {
		out = append(out, tickRecord(scheds[r.Schedule], r))
	}
	return out, nil
}

// tickRecord is the record of ledger row r of schedule s (nil if it is not
// registered).
func tickRecord(s *schedule, r store.TickRow) TickRecord {
	at := r.At.UTC()
	if s != nil {
		at = at.In(s.Location)
	}
	return TickRecord{Tick: Tick{Schedule: r.Schedule, At: at, RunID: r.RunID, Period: at.Format("2006-01-02")},
		Outcome: TickOutcome(r.Outcome), RecordedAt: r.RecordedAt, Jobs: r.Jobs}
}

// Clock returns the clock the client goes by (WithClock; SystemClock{} by
// default), for tools such as queue/console that show schedules and
// windows as of the same now.
func (c *ops) Clock() Clock { return c.cfg.clock }

// missedTicks lists the ticks in the review's scope that created nothing:
// those the ledger records as missed or as having created no job, and
// those of the registered schedules' timetables, due by now, that the
// ledger does not know (no runner ran, or they fired before the ledger
// existed) and that have no job.
func (c *ops) missedTicks(ctx context.Context, q ReviewQuery) ([]Tick, error) {
	scheds, _ := c.reg.schedules.Now()
	var sq store.TicksQuery
	inScope := func(Tick) bool { return true }
	switch {
	case q.RunID != "":
		name, stamp, _ := strings.Cut(q.RunID, "@")
		at, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return nil, nil // not a tick's run
		}
		sq = store.TicksQuery{Schedules: []string{name}, From: at, To: at.Add(time.Second)}
		inScope = func(t Tick) bool { return t.RunID == q.RunID }
	case q.Period != "":
		day, err := time.Parse("2006-01-02", q.Period)
		if err != nil {
			return nil, nil // a period set by hand
		}
		// Local dates span at most these UTC times, in any zone.
		sq = store.TicksQuery{From: day.Add(-14 * time.Hour), To: day.Add(38 * time.Hour)}
		inScope = func(t Tick) bool { return t.Period == q.Period }
	default:
		sq = store.TicksQuery{From: q.From, To: q.To}
	}
	recorded, err := c.ticks(ctx, sq)
	if err != nil {
		return nil, fmt.Errorf("queue: review: %w", err)
	}
	type key struct {
		name string
		at   int64
	}
	known := map[key]bool{}
	var missed []Tick
	for _, r := range recorded {
		if !inScope(r.Tick) {
			continue
		}
		known[key{r.Schedule, r.At.UnixNano()}] = true
		if r.Outcome == TickMissed || r.Jobs == 0 {
			missed = append(missed, r.Tick)
		}
	}
	now := c.cfg.clock.Now()
	for _, s := range scheds {
		var ats []time.Time
		switch {
		case q.Period != "":
			ats = s.timing.OnDay(q.Period)
		case q.RunID != "":
			if at, ok := s.timing.Of(q.RunID); ok {
				ats = []time.Time{at}
			}
		default:
			ats = s.timing.Between(q.From, q.To)
		}
		due := operate.DueBefore(&s.timing, now)
		for _, at := range ats {
			if known[key{s.Name, at.UnixNano()}] || !at.Before(due) {
				continue
			}
			t := Tick(operate.TickOf(s.Name, s.timing.Tick(at)))
			n, err := c.st.Count(ctx, c.db, store.Filter{RunID: t.RunID})
			if err != nil {
				return nil, fmt.Errorf("queue: review: %w", notMigrated(err))
			}
			if n == 0 {
				missed = append(missed, t)
			}
		}
	}
	slices.SortFunc(missed, func(a, b Tick) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Schedule, b.Schedule)
	})
	return missed, nil
}
